package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/metering"
	"github.com/firstword/firstword/internal/provider/sim"
	"github.com/firstword/firstword/internal/router"
)

// dialectClean is the answer of the dialect trials: accents, CJK, Greek,
// an emoji, and a paragraph break (the sim sends "\n\n" as a token of its
// own, so an answer can break right after it).
const dialectClean = "Naïve café owners serve crème brûlée at noon. 日本語のテキストも混ざります。 " +
	"Then the story goes on, with Ümlauts, señoras and an emoji 🙂 here.\n\n" +
	"Ελληνικά λέξεις follow; a second paragraph ends it."

// upstreamDialect is one upstream dialect firstword reads, as a provider
// type and model (which decide the continuation method, see
// router.ContinuationFor), and the sim's way of speaking it.
type upstreamDialect struct {
	name  string
	ptype string
	model string
	// extra is added to the deployments' YAML.
	extra string
	// base is appended to the upstream's URL for base_url.
	base string
	// simPath and simBody: a minimal streamed request to the sim in the
	// dialect, whose one user message is text.
	simPath string
	simBody func(text string) string
	method  router.Continuation
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func chatCompletionsBody(text string) string {
	return `{"model":"small","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":` + jsonString(text) + `}]}`
}

var upstreamDialects = []upstreamDialect{
	{name: "openai", ptype: "openai", model: "gpt-4o", base: "/v1", simPath: "/v1/chat/completions",
		simBody: chatCompletionsBody, method: router.ContinueInstruct},
	{name: "vllm", ptype: "openai", model: "qwen3-8b", extra: ", continuation: prefill", base: "/v1", simPath: "/v1/chat/completions",
		simBody: chatCompletionsBody, method: router.ContinueFinalMessage},
	{name: "responses", ptype: "openai-responses", model: "gpt-5", base: "/v1", simPath: "/v1/responses",
		simBody: func(text string) string {
			return `{"model":"small","stream":true,"input":` + jsonString(text) + `}`
		}, method: router.ContinueInstruct},
	{name: "anthropic-prefill", ptype: "anthropic", model: "claude-3-7-sonnet-20250219", base: "/v1", simPath: "/v1/messages",
		simBody: messagesBody, method: router.ContinuePrefill},
	{name: "anthropic-instruct", ptype: "anthropic", model: "claude-sonnet-4-6", base: "/v1", simPath: "/v1/messages",
		simBody: messagesBody, method: router.ContinueInstruct},
	{name: "gemini", ptype: "gemini", model: "gemini-2.5-flash", base: "/v1beta", simPath: "/v1beta/models/small:streamGenerateContent?alt=sse",
		simBody: func(text string) string {
			return `{"contents":[{"role":"user","parts":[{"text":` + jsonString(text) + `}]}]}`
		}, method: router.ContinueInstruct},
	{name: "ollama", ptype: "ollama", model: "llama3.2", base: "", simPath: "/api/chat",
		simBody: func(text string) string {
			return `{"model":"small","messages":[{"role":"user","content":` + jsonString(text) + `}]}`
		}, method: router.ContinuePrefill},
}

func messagesBody(text string) string {
	return `{"model":"small","max_tokens":8192,"stream":true,"messages":[{"role":"user","content":` + jsonString(text) + `}]}`
}

// simStream is the sim's byte-exact answer in a dialect to the request
// whose one user message is text, with directive, and its content type.
func simStream(t *testing.T, h http.Handler, d upstreamDialect, text, directive string) (string, string) {
	t.Helper()
	r := httptest.NewRequest("POST", d.simPath, strings.NewReader(d.simBody(text)))
	r.Header.Set("X-Firstword-Sim", directive)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%s: the sim answered %d: %s", d.name, w.Code, w.Body)
	}
	return w.Body.String(), w.Header().Get("Content-Type")
}

// finishAt is where the event that finishes an answer starts in a
// dialect's stream (its finish reason): a cut before it leaves the answer
// unfinished. A stream without one ends there.
func finishAt(raw string) int {
	best := -1
	for _, m := range []string{`"finish_reason":"`, `"stop_reason":"`, `event: response.completed`, `"finishReason"`, `"done":true`} {
		if i := strings.Index(raw, m); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	if best < 0 {
		return len(raw)
	}
	// The start of its line: the event is incomplete from there on.
	return strings.LastIndexByte(raw[:best], '\n') + 1
}

// splitWords returns a dialect's stream of text with each event that
// carries a piece of it (a JSON member whose value is the piece) of two
// characters or more split into two events, cut at a random character
// boundary inside the piece: the sim sends whole words, a model sends
// pieces of words.
func splitWords(t *testing.T, raw, text string, ndjson bool, rng *seededRand) string {
	t.Helper()
	sep := "\n\n"
	if ndjson {
		sep = "\n"
	}
	var out strings.Builder
	pos, split := 0, 0
	for _, ev := range strings.SplitAfter(raw, sep) {
		// The longest piece of text from pos that the event carries.
		piece := ""
		for j := len(text); j > pos && piece == ""; j-- {
			if q := ":" + jsonString(text[pos:j]); utf8.RuneStart(text[j%len(text)]) || j == len(text) {
				if i := strings.Index(ev, q); i >= 0 && strings.Count(ev, q) == 1 && strings.ContainsAny(ev[i+len(q):i+len(q)+1], ",}") {
					piece = text[pos:j]
				}
			}
		}
		if utf8.RuneCountInString(piece) < 2 {
			out.WriteString(ev)
			pos += len(piece)
			continue
		}
		// Cut after 1 to n-1 characters.
		k, n := 0, 1+rng.intn(utf8.RuneCountInString(piece)-1)
		for range n {
			_, size := utf8.DecodeRuneInString(piece[k:])
			k += size
		}
		q := ":" + jsonString(piece)
		out.WriteString(strings.Replace(ev, q, ":"+jsonString(piece[:k]), 1))
		out.WriteString(strings.Replace(ev, q, ":"+jsonString(piece[k:]), 1))
		pos += len(piece)
		split++
	}
	if pos != len(text) || split < 10 {
		t.Fatalf("split %d events, read %d bytes of %d from the stream:\n%s", split, pos, len(text), raw)
	}
	return out.String()
}

// upMsg is one message of a request to an upstream, in any dialect.
type upMsg struct{ role, text string }

// upMessages reads the messages of a request in any of the five
// dialects: Chat Completions' and Anthropic's and Ollama's messages,
// Gemini's contents (role "model" is the assistant), Responses' input
// (a string, or items with a role). A content is a string or a list of
// parts with text.
func upMessages(body []byte) ([]upMsg, map[string]any, error) {
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, nil, err
	}
	var list []any
	switch v := raw["input"].(type) {
	case string:
		return []upMsg{{"user", v}}, raw, nil
	case []any:
		list = v
	}
	if l, ok := raw["messages"].([]any); ok {
		list = l
	}
	if l, ok := raw["contents"].([]any); ok {
		list = l
	}
	var out []upMsg
	for _, it := range list {
		m, _ := it.(map[string]any)
		role := str(m["role"])
		if role == "model" {
			role = "assistant"
		}
		content := m["content"]
		if content == nil {
			content = m["parts"]
		}
		var text strings.Builder
		switch c := content.(type) {
		case string:
			text.WriteString(c)
		case []any:
			for _, p := range c {
				pm, _ := p.(map[string]any)
				text.WriteString(str(pm["text"]))
			}
		}
		out = append(out, upMsg{role, text.String()})
	}
	return out, raw, nil
}

// dialectTail is the delivered text's end an instructed continuation
// quotes: at most 200 bytes, from a character's start.
func dialectTail(s string) string {
	i := max(0, len(s)-200)
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// dialectRig is one dialect's pair of upstreams behind an alias named as
// the dialect: "a" dies after a random number of bytes of the sim's
// stream, "b" continues (or, after a break before the first word,
// answers).
type dialectRig struct {
	d       upstreamDialect
	text    string // the sim's stream of the clean answer
	split   string // text with each word's event split in two, inside the word
	tool    string // the sim's stream of a tool call
	ctype   string
	dies    *httptest.Server
	cont    *httptest.Server
	asked   atomic.Int32 // continuation requests b was sent
	midWord atomic.Int32 // of them, after a text that ended inside a word
	answers atomic.Int32 // requests b was sent
}

// seededRand is a rand shared by the upstreams' handlers.
type seededRand struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (r *seededRand) intn(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}

func newDialectRig(t *testing.T, d upstreamDialect, simH http.Handler, rng *seededRand) *dialectRig {
	t.Helper()
	if got := router.ContinuationFor(d.ptype, d.model, strings.TrimPrefix(d.extra, ", continuation: ")); got != d.method {
		t.Fatalf("%s: ContinuationFor says %s, the test expects %s", d.name, got, d.method)
	}
	const directive = "echo gap=0s ttft=0s"
	g := &dialectRig{d: d}
	g.text, g.ctype = simStream(t, simH, d, dialectClean, directive)
	g.split = splitWords(t, g.text, dialectClean, strings.HasPrefix(g.ctype, "application/x-ndjson"), rng)
	g.tool, _ = simStream(t, simH, d, "tool", "tool=lookup gap=0s ttft=0s")
	if d.ptype == "gemini" {
		// Gemini sends a call whole, the sim's with the finish in the
		// same event; a stream of parallel calls finishes on the last:
		// this one is the first of them.
		g.tool = strings.Replace(g.tool, `,"finishReason":"STOP"`, "", 1)
	}
	for _, raw := range []string{g.text, g.tool} {
		if finishAt(raw) == len(raw) && d.ptype != "gemini" {
			t.Fatalf("%s: no finish in %q", d.name, raw)
		}
	}
	g.dies = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msgs, _, err := upMessages(body)
		if err != nil || len(msgs) == 0 {
			t.Errorf("%s: request to the dying upstream: %v, %s", d.name, err, body)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var trial int
		fmt.Sscanf(msgs[0].text, "trial %d", &trial)
		raw := g.text
		if trial%10 != 5 && trial/3%2 == 0 {
			raw = g.split // a cut can end the text inside a word
		}
		lo := 1
		if strings.HasPrefix(msgs[0].text, "tool") {
			// Dies after the tool call started, before it finished.
			raw = g.tool
			i := strings.Index(raw, "lookup")
			lo = i + strings.Index(raw[i:], "\n") + 1
			if !strings.HasPrefix(g.ctype, "application/x-ndjson") {
				lo = i + strings.Index(raw[i:], "\n\n") + 2
			}
		}
		hi := finishAt(raw)
		cut := lo + rng.intn(hi-lo+1)
		if strings.HasPrefix(msgs[0].text, "trial") && trial%10 == 5 {
			// Right after the paragraph break: the delivered text ends
			// with whitespace.
			i := strings.Index(raw, `\n\n"`)
			cut = i + strings.Index(raw[i:], "\n") + 1
			if !strings.HasPrefix(g.ctype, "application/x-ndjson") {
				cut = i + strings.Index(raw[i:], "\n\n") + 2
			}
		}
		w.Header().Set("Content-Type", g.ctype)
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, raw[:cut])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-answer
	}))
	t.Cleanup(g.dies.Close)
	g.cont = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.answers.Add(1)
		body, _ := io.ReadAll(r.Body)
		msgs, raw, err := upMessages(body)
		if err != nil || len(msgs) == 0 {
			t.Errorf("%s: request to the continuing upstream: %v, %s", d.name, err, body)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var trial int
		fmt.Sscanf(msgs[0].text, "trial %d", &trial)
		from := 0
		ai := -1
		for i, m := range msgs {
			if m.role == "assistant" {
				ai = i
			}
		}
		if ai >= 0 {
			g.asked.Add(1)
			done := msgs[ai].text
			last := msgs[len(msgs)-1]
			switch d.method {
			case router.ContinuePrefill, router.ContinueFinalMessage:
				if ai != len(msgs)-1 {
					t.Errorf("%s trial %d: a prefill must end with the assistant message: %+v", d.name, trial, msgs)
				}
			case router.ContinueInstruct:
				if ai != len(msgs)-2 || last.role != "user" || !strings.Contains(last.text, "<<<\n"+dialectTail(done)+"\n>>>") {
					t.Errorf("%s trial %d: an instructed continuation must end with a user message quoting the tail: %+v", d.name, trial, msgs)
				}
			}
			if d.method == router.ContinueFinalMessage && (raw["continue_final_message"] != true || raw["add_generation_prompt"] != false) {
				t.Errorf("%s trial %d: continue_final_message %v, add_generation_prompt %v", d.name, trial, raw["continue_final_message"], raw["add_generation_prompt"])
			}
			if d.ptype == "anthropic" && d.method == router.ContinuePrefill && strings.TrimRight(done, " \t\r\n") != done {
				// Anthropic refuses it: "final assistant content cannot
				// end with trailing whitespace".
				t.Errorf("%s trial %d: the prefill ends with whitespace: %q", d.name, trial, done)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: final assistant content cannot end with trailing whitespace"}}`)
				return
			}
			if trial%10 == 5 && !strings.HasSuffix(strings.TrimRight(done, "\n")+"\n\n", "here.\n\n") {
				t.Errorf("%s trial %d: delivered %q, want the text up to the paragraph break", d.name, trial, done)
			}
			if !strings.HasPrefix(dialectClean, done) {
				t.Errorf("%s trial %d: delivered %q is not a prefix of the answer", d.name, trial, done)
			}
			from = len(done)
			if before, _ := utf8.DecodeLastRuneInString(done); from < len(dialectClean) && unicode.IsLetter(before) {
				if after, _ := utf8.DecodeRuneInString(dialectClean[from:]); unicode.IsLetter(after) {
					g.midWord.Add(1)
				}
			}
			switch trial % 3 {
			case 1: // repeat the last 4 to 12 bytes
				from = max(0, from-4-rng.intn(9))
				for from > 0 && !utf8.RuneStart(dialectClean[from]) {
					from--
				}
			case 2: // restart the last word
				from = strings.LastIndexAny(done, " \n") + 1
			}
			if from >= len(dialectClean) {
				// The whole answer was delivered: a model asked to go on
				// restates its last word (the sim cannot echo nothing in
				// every dialect).
				from = strings.LastIndexByte(dialectClean, ' ') + 1
			}
		}
		req, _ := http.NewRequestWithContext(r.Context(), "POST", d.simPath, strings.NewReader(d.simBody(dialectClean[from:])))
		req.Header.Set("X-Firstword-Sim", directive)
		simH.ServeHTTP(w, req)
	}))
	t.Cleanup(g.cont.Close)
	return g
}

// yaml is the rig's providers and alias.
func (g *dialectRig) yaml() (providers, models string) {
	d := g.d
	providers = fmt.Sprintf("  %sa: {type: %s, base_url: %q}\n  %sb: {type: %s, base_url: %q}\n",
		d.name, d.ptype, g.dies.URL+d.base, d.name, d.ptype, g.cont.URL+d.base)
	models = fmt.Sprintf("  %s:\n    breaker: {consecutive_failures: 100000, min_requests: 100000}\n    deployments:\n"+
		"      - {provider: %sa, model: %s%s}\n      - {provider: %sb, model: %s, priority: 1%s}\n",
		d.name, d.name, d.model, d.extra, d.name, d.model, d.extra)
	return providers, models
}

// messagesResult is what a minimal /v1/messages client read.
type messagesResult struct {
	text, stop, errEv, id, routeTrailer string
	stopped                             bool
}

func streamMessages(t *testing.T, url, body string) messagesResult {
	t.Helper()
	resp := gatewaytest.PostPath(t, url, "/v1/messages", body)
	defer resp.Body.Close()
	res := messagesResult{id: resp.Header.Get("X-Request-Id")}
	for _, e := range gatewaytest.ReadEvents(resp.Body) {
		if e.Comment {
			continue
		}
		m := decode(t, e.Data)
		switch e.Name {
		case "content_block_delta":
			d, _ := m["delta"].(map[string]any)
			res.text += str(d["text"])
		case "message_delta":
			d, _ := m["delta"].(map[string]any)
			res.stop = str(d["stop_reason"])
		case "message_stop":
			res.stopped = true
		case "error":
			res.errEv = e.Data
		}
	}
	res.routeTrailer = resp.Trailer.Get("X-Firstword-Route")
	return res
}

// TestContinuationEveryDialectOnRealSockets: for each upstream dialect
// firstword reads (and each continuation method: instruct, prefill,
// continue_final_message), an upstream speaking it dies after a random
// number of bytes of the sim's own stream of the answer (or of it with
// its words split, see splitWords; or right after its paragraph break),
// and the next continues exactly, repeats the last bytes or restarts the
// last word, in its dialect, after checking the continuation request's
// shape. Every client, streamed on Chat Completions and on Messages, and
// not streamed, reads the clean answer; the record bills the broken
// attempt. A tool call in flight is never continued: the stream ends with
// an error, and the next upstream is sent nothing.
func TestContinuationEveryDialectOnRealSockets(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := &seededRand{rng: rand.New(rand.NewPCG(seed, 33))}
	simH := sim.New(sim.Config{Name: "sim", Seed: 1}).Handler()
	rigs := map[string]*dialectRig{}
	var providers, models strings.Builder
	for _, d := range upstreamDialects {
		g := newDialectRig(t, d, simH, rng)
		rigs[d.name] = g
		p, m := g.yaml()
		providers.WriteString(p)
		models.WriteString(m)
	}
	gw := gatewaytest.Start(t, gatewaytest.MustParse(t, "providers:\n"+providers.String()+"models:\n"+models.String()))
	const trials = 100
	for _, d := range upstreamDialects {
		g := rigs[d.name]
		t.Run(d.name, func(t *testing.T) {
			start := time.Now()
			continued, viaMessages, notStreamed := 0, 0, 0
			for trial := range trials {
				prompt := fmt.Sprintf("trial %d", trial)
				var text, errEv, id, route string
				var complete bool
				switch {
				case trial%10 == 9:
					// Not streamed: the route is in the headers.
					notStreamed++
					body, _ := json.Marshal(map[string]any{"model": d.name, "messages": []map[string]string{{"role": "user", "content": prompt}}})
					resp := gatewaytest.Post(t, gw.URL, string(body))
					var out struct {
						Choices []struct {
							Message      struct{ Content string } `json:"message"`
							FinishReason string                   `json:"finish_reason"`
						} `json:"choices"`
					}
					err := json.NewDecoder(resp.Body).Decode(&out)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
						t.Fatalf("trial %d: status %d, %+v, %v", trial, resp.StatusCode, out, err)
					}
					text, id, complete = out.Choices[0].Message.Content, resp.Header.Get("X-Request-Id"), out.Choices[0].FinishReason == "stop"
					if r := resp.Header.Get("X-Firstword-Route"); strings.Contains(r, "continued on") {
						route = r
					}
				case trial%4 == 3:
					viaMessages++
					body, _ := json.Marshal(map[string]any{"model": d.name, "max_tokens": 4096, "stream": true,
						"messages": []map[string]string{{"role": "user", "content": prompt}}})
					r := streamMessages(t, gw.URL, string(body))
					text, errEv, id, route, complete = r.text, r.errEv, r.id, r.routeTrailer, r.stopped && r.stop == "end_turn"
				default:
					body, _ := json.Marshal(map[string]any{"model": d.name, "stream": true, "stream_options": map[string]bool{"include_usage": true},
						"messages": []map[string]string{{"role": "user", "content": prompt}}})
					r := streamChat(t, gw.URL, string(body))
					text, errEv, id, route, complete = r.text, r.errEv, r.id, r.routeTrailer, r.done && r.finish == "stop"
				}
				if text != dialectClean || errEv != "" || !complete {
					t.Fatalf("trial %d: text %q, error %q, complete %v; want %q", trial, text, errEv, complete, dialectClean)
				}
				rec := waitRecord(t, gw, id)
				if rec.Status != metering.StatusComplete {
					t.Errorf("trial %d: status %s", trial, rec.Status)
				}
				if route == "" {
					continue // broke before its first word: a plain fallback
				}
				continued++
				a, b := d.name+"a/"+d.model, d.name+"b/"+d.model
				if want := a + "=mid_stream_error, continued on " + b + "=ok"; route != want {
					t.Errorf("trial %d: route %q, want %q", trial, route, want)
				}
				// The broken attempt is billed apart (estimated: it died
				// before its usage); the answer's usage is the
				// continuation's, as its upstream reported it.
				if rec.Continuations != 1 || rec.Deployment != b || len(rec.Spent) != 1 || rec.Spent[0].Deployment != a ||
					rec.Spent[0].Usage.OutputTokens == 0 || rec.Usage.OutputTokens == 0 || rec.Usage.Estimated {
					t.Errorf("trial %d: continuations %d, deployment %q, usage %+v, spent %+v", trial, rec.Continuations, rec.Deployment, rec.Usage, rec.Spent)
				}
			}
			if continued < trials/2 || int(g.asked.Load()) != continued {
				t.Errorf("%d of %d answers continued (%d continuation requests), want at least half", continued, trials, g.asked.Load())
			}
			if g.midWord.Load() == 0 {
				t.Errorf("no answer broke inside a word")
			}
			t.Logf("%d of %d continued (%d inside a word), %d read on /v1/messages, %d not streamed, %v", continued, trials, g.midWord.Load(), viaMessages, notStreamed, time.Since(start).Round(time.Millisecond))
		})
	}
	for _, d := range upstreamDialects {
		g := rigs[d.name]
		t.Run(d.name+"/tool-call", func(t *testing.T) {
			before := g.answers.Load()
			for trial := range 5 {
				body, _ := json.Marshal(map[string]any{"model": d.name, "stream": true,
					"messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("tool %d", trial)}},
					"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object"}}}}})
				resp := gatewaytest.Post(t, gw.URL, string(body))
				evs := gatewaytest.ReadEvents(resp.Body)
				resp.Body.Close()
				var errEv string
				var done, called bool
				for _, e := range evs {
					switch {
					case e.Comment:
					case e.Data == "[DONE]":
						done = true
					case strings.Contains(e.Data, `"error"`):
						errEv = e.Data
					case strings.Contains(e.Data, `"lookup"`):
						called = true
					}
				}
				if !called || errEv == "" || done {
					t.Fatalf("trial %d: tool call seen %v, error %q, [DONE] %v: want the call's start, then an error", trial, called, errEv, done)
				}
				rec := waitRecord(t, gw, resp.Header.Get("X-Request-Id"))
				if rec.Status == metering.StatusComplete || rec.Continuations != 0 {
					t.Errorf("trial %d: status %s, continuations %d", trial, rec.Status, rec.Continuations)
				}
				if trial == 0 {
					t.Logf("error event: %s", errEv)
				}
			}
			if n := g.answers.Load() - before; n != 0 {
				t.Errorf("the continuing upstream was sent %d requests: a tool call in flight is never continued", n)
			}
		})
	}
}
