package gateway_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
)

// End-to-end cases of issue 16: how upstream streams end, their legacy
// error lines, compressed bodies and keep-alive comments, through the
// gateway to an OpenAI client. The streams are the wire packages' test
// data (their testdata/SOURCES.md says where each comes from); each
// package's own tests cover the branches.

func wireFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile("../wire/" + path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const anthropicEndings = `
providers:
  claude:
    type: anthropic
    base_url: {{UP}}/v1
models:
  chat: {max_attempts: 1, deployments: [{provider: claude, model: claude-sonnet-4-20250514}]}
`

const geminiEndings = `
providers:
  gem:
    type: gemini
    base_url: {{UP}}/v1beta
models:
  chat: {max_attempts: 1, deployments: [{provider: gem, model: gemini-2.0-flash}]}
`

const streamRequest = `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// serveBody answers every request with body as an event stream.
func serveBody(t *testing.T, body []byte) *gatewaytest.Upstream {
	return gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		gatewaytest.SSEWrite(w, string(body))
	})
}

// TestEndOfBodyWithoutBlankLine: a stream whose end marker is whole but
// not followed by its blank line at the end of the body is a finished
// answer: the finish reason and [DONE] reach the client, not an error
// event ("no message_stop", "no [DONE]"), and the tool_calls finish is
// forwarded.
func TestEndOfBodyWithoutBlankLine(t *testing.T) {
	for _, tt := range []struct {
		name, config, file string
	}{
		{"anthropic message_stop without a newline", anthropicEndings, "anthropic/testdata/sdk_python_tool_use.sse"},
		{"openai [DONE] with one newline", gatewaytest.MinimalConfig + oneAttempt, "openai/testdata/framing_done_one_newline.sse"},
		{"openai [DONE] without a newline", gatewaytest.MinimalConfig + oneAttempt, "openai/testdata/framing_done_no_newline.sse"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := serveBody(t, wireFile(t, tt.file))
			gw := gatewaytest.StartYAML(t, tt.config, up.URL)
			resp := gatewaytest.Post(t, gw.URL, streamRequest)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out := string(b)
			if resp.StatusCode != 200 || strings.Contains(out, `"error"`) || strings.Count(out, `"finish_reason":"tool_calls"`) != 1 ||
				!strings.HasSuffix(out, "data: [DONE]\n\n") {
				t.Errorf("%d\n%s\nwant one tool_calls finish and [DONE], no error", resp.StatusCode, out)
			}
		})
	}
}

// TestGeminiStreamErrorObject: Gemini's error object at the end of a
// stream, raw or in a data field, is a terminal error event, classified
// by its status; it was ignored, and the answer reported finished twice
// with estimated usage. A finish reason repeated in two events is sent
// once.
func TestGeminiStreamErrorObject(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		wantError  bool
	}{
		{"raw, after text", "spliced_raw_error_cancelled.sse", true},
		{"in a data field", "spliced_data_error_cancelled.sse", true},
		{"raw, after two finishes", "constructed_finish_twice_raw_error.sse", true},
		{"two finishes", "constructed_finish_twice.sse", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := serveBody(t, wireFile(t, "gemini/testdata/"+tt.file))
			gw := gatewaytest.StartYAML(t, geminiEndings, up.URL)
			resp := gatewaytest.Post(t, gw.URL, streamRequest)
			events := gatewaytest.ReadEvents(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || len(events) == 0 {
				t.Fatalf("status %d, %d events", resp.StatusCode, len(events))
			}
			var finishes int
			for _, ev := range events {
				finishes += strings.Count(ev.Data, `"finish_reason":"stop"`)
			}
			last := events[len(events)-1].Data
			switch {
			case tt.wantError && (!strings.Contains(last, `"error"`) || !strings.Contains(last, "The operation was cancelled.") || finishes != 0):
				t.Errorf("last event %s, %d finishes; want the error, no finish", last, finishes)
			case !tt.wantError && (last != "[DONE]" || finishes != 1):
				t.Errorf("last event %s, %d finishes; want [DONE] after one finish", last, finishes)
			}
		})
	}
	t.Run("alone, before any chunk", func(t *testing.T) {
		up := serveBody(t, wireFile(t, "gemini/testdata/constructed_raw_error_only.sse"))
		gw := gatewaytest.StartYAML(t, geminiEndings, up.URL)
		checkErrorResponse(t, gatewaytest.Post(t, gw.URL, streamRequest), 503, "overloaded")
	})
}

// TestLegacyErrorLines: llama.cpp's "error:" line and the error objects
// llama.cpp and vLLM send in a data field are the upstream's own error,
// with its status and message, before the first chunk (it was "the end
// marker came before any chunk", 502) and after it.
func TestLegacyErrorLines(t *testing.T) {
	for _, tt := range []struct {
		file   string
		status int
		code   string
	}{
		{"llamacpp_error_field_context_size.sse", 400, "context_length_exceeded"},
		{"llamacpp_data_error_context_size.sse", 400, "context_length_exceeded"},
		{"vllm_error_before_chunks.sse", 400, "context_length_exceeded"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			up := serveBody(t, wireFile(t, "openai/testdata/"+tt.file))
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
			for _, stream := range []string{"true", "false"} {
				checkErrorResponse(t, gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`), tt.status, tt.code)
			}
		})
	}
	for _, tt := range []struct{ file, text, message string }{
		{"llamacpp_error_field_after_chunks.sse", "Once upon", "context shift is disabled"},
		{"llamacpp_data_error_after_chunks.sse", "Once upon", "context shift is disabled"},
		{"vllm_error_after_chunks.sse", "Bonjour à", "Error in detokenization"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			up := serveBody(t, wireFile(t, "openai/testdata/"+tt.file))
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
			resp := gatewaytest.Post(t, gw.URL, streamRequest)
			events := gatewaytest.ReadEvents(resp.Body)
			resp.Body.Close()
			var text strings.Builder
			for _, ev := range events {
				text.WriteString(deltaText(ev.Data))
			}
			last := ""
			if len(events) > 0 {
				last = events[len(events)-1].Data
			}
			if resp.StatusCode != 200 || text.String() != tt.text || !strings.Contains(last, tt.message) {
				t.Errorf("%d, text %q, last event %s; want %q then an error saying %q", resp.StatusCode, text.String(), last, tt.text, tt.message)
			}
		})
	}
}

// deltaText is the content of an OpenAI chunk event, if any.
func deltaText(data string) string {
	var c struct {
		Choices []struct {
			Delta struct{ Content string } `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(data), &c) != nil || len(c.Choices) == 0 {
		return ""
	}
	return c.Choices[0].Delta.Content
}

// streamedTexts reads a client's event stream as it comes, sending the
// text of each chunk on the returned channel, and closes it at the end.
func streamedTexts(r io.Reader) <-chan string {
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
				if s := deltaText(d); s != "" {
					ch <- s
				}
			}
		}
	}()
	return ch
}

// relay is an upstream that sends events one at a time and waits, after
// each one carrying text, until the client received that text: a
// gateway that held an event back stalls it, and the test says which.
type relay struct {
	t    *testing.T
	mu   sync.Mutex
	got  []string
	cond *sync.Cond
}

func newRelay(t *testing.T) *relay {
	r := &relay{t: t}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// watch takes the client's texts from ch.
func (r *relay) watch(ch <-chan string) {
	for s := range ch {
		r.mu.Lock()
		r.got = append(r.got, s)
		r.cond.Broadcast()
		r.mu.Unlock()
	}
}

// await waits until the client has received text, at most d.
func (r *relay) await(text string, d time.Duration) bool {
	deadline := time.AfterFunc(d, func() { r.mu.Lock(); r.cond.Broadcast(); r.mu.Unlock() })
	defer deadline.Stop()
	end := time.Now().Add(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if strings.Contains(strings.Join(r.got, ""), text) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		r.cond.Wait()
	}
}

// TestCompressedUpstreamStreams: an upstream that compresses its stream
// (gzip, flushed per event) is decoded (it was read as raw bytes: "no
// [DONE] after 0 chunks"), and each event reaches the client before the
// upstream sends the next.
func TestCompressedUpstreamStreams(t *testing.T) {
	raw := wireFile(t, "openai/testdata/openai_chat_stream_usage.sse")
	events := strings.SplitAfter(string(raw), "\n\n")
	events = events[:len(events)-1]
	rl := newRelay(t)
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if ae := r.Header.Get("Accept-Encoding"); ae != "identity" {
			t.Errorf("Accept-Encoding = %q, want identity", ae)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		var sent strings.Builder
		for k, ev := range events {
			io.WriteString(zw, ev)
			zw.Flush()
			http.NewResponseController(w).Flush()
			text := deltaText(strings.TrimSpace(strings.TrimPrefix(ev, "data: ")))
			if text == "" {
				continue
			}
			sent.WriteString(text)
			if !rl.await(sent.String(), 5*time.Second) {
				t.Errorf("upstream event %d (%q) never reached the client before the next was due", k, text)
				return
			}
		}
		zw.Close()
	})
	gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
	resp := gatewaytest.Post(t, gw.URL, streamRequest)
	defer resp.Body.Close()
	var body bytes.Buffer
	rl.watch(streamedTexts(io.TeeReader(resp.Body, &body)))
	if resp.StatusCode != 200 || !strings.Contains(body.String(), `"finish_reason":"stop"`) || !strings.HasSuffix(body.String(), "data: [DONE]\n\n") {
		t.Errorf("%d\n%s", resp.StatusCode, body.String())
	}
	if got := strings.Join(rl.got, ""); got != usageFixtureText {
		t.Errorf("text %q, want %q", got, usageFixtureText)
	}
	t.Run("an encoding not decoded", func(t *testing.T) {
		up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "br")
			w.Write([]byte{0x1b, 0x9f, 0x00, 0xf8})
		})
		gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
		resp := gatewaytest.Post(t, gw.URL, streamRequest)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 502 || !strings.Contains(string(b), "Content-Encoding br") {
			t.Errorf("%d %s; want 502 naming the encoding", resp.StatusCode, b)
		}
	})
}

const usageFixtureText = "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or a weather app."

// TestKeepAliveDoesNotHoldChunk: a chunk followed in the same write by
// OpenRouter's CRLF keep-alive (": OPENROUTER PROCESSING\r\n\r\n") reaches
// the client at once. The reader took the comment's blank line for
// another event, so the gateway held the chunk back to write it with
// the next one, until the upstream's next event.
func TestKeepAliveDoesNotHoldChunk(t *testing.T) {
	for _, keepAlive := range []string{": OPENROUTER PROCESSING\r\n\r\n", ": ping\n\n"} {
		t.Run(strings.TrimSpace(keepAlive), func(t *testing.T) {
			rl := newRelay(t)
			up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				gatewaytest.SSEHeaders(w)
				gatewaytest.SSEWrite(w, keepAlive+keepAlive)
				gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("Hello")+keepAlive)
				if !rl.await("Hello", 2*time.Second) {
					t.Errorf("the chunk before a keep-alive was held back")
				}
				gatewaytest.SSEWrite(w, keepAlive+gatewaytest.ChunkJSON(" world")+keepAlive+gatewaytest.FinishJSON)
			})
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
			resp := gatewaytest.Post(t, gw.URL, streamRequest)
			defer resp.Body.Close()
			var body bytes.Buffer
			rl.watch(streamedTexts(io.TeeReader(resp.Body, &body)))
			if got := strings.Join(rl.got, ""); got != "Hello world" || !strings.Contains(body.String(), `"finish_reason":"stop"`) {
				t.Errorf("text %q\n%s", got, body.String())
			}
		})
	}
}
