package yardstick

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// replay serves a recorded event stream: the events before the first one
// that carries text at once, then after ttft the first text event, and
// every later event gap after the previous one.
type replay struct {
	events [][]byte
	isText func([]byte) bool
	ttft   time.Duration
	gap    time.Duration
}

func newReplay(t *testing.T, file string, isText func([]byte) bool, ttft, gap time.Duration) *replay {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var evs [][]byte
	for _, e := range bytes.Split(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		if len(bytes.TrimSpace(e)) > 0 {
			evs = append(evs, append(e, '\n', '\n'))
		}
	}
	return &replay{events: evs, isText: isText, ttft: ttft, gap: gap}
}

func (p *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	texts := 0
	for _, e := range p.events {
		if p.isText(e) {
			d := p.gap
			if texts == 0 {
				d = p.ttft
			}
			texts++
			time.Sleep(d)
		}
		w.Write(e)
		rc.Flush()
	}
}

// chatTarget serves firstword's /v1/chat events: meta and a heartbeat at
// once, then n deltas, the first after ttft and the rest gap apart.
func chatTarget(ttft, gap time.Duration, n int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		io.WriteString(w, "retry: 1000\n\nevent: meta\ndata: {\"conversation_id\":\"c\",\"message_id\":\"m\"}\n\n: ping\n\n")
		rc.Flush()
		for i := range n {
			if i == 0 {
				time.Sleep(ttft)
			} else {
				time.Sleep(gap)
			}
			fmt.Fprintf(w, "event: delta\ndata: {\"text\":\" w%d\"}\n\n", i)
			rc.Flush()
		}
		fmt.Fprintf(w, "event: done\ndata: {\"status\":\"complete\",\"usage\":{\"input_tokens\":3,\"output_tokens\":%d}}\n\n", n)
	}
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

func cellOf(t *testing.T, r *Report, target string, conc int) Cell {
	t.Helper()
	for _, c := range r.Cells {
		if c.Target == target && c.Concurrency == conc {
			return c
		}
	}
	t.Fatalf("no cell for %s at %d in %+v", target, conc, r.Cells)
	return Cell{}
}

// TestKnownDelays measures fake targets of every surface, each with a
// time to first text of 80 ms and text chunks 10 ms apart, on real
// sockets, and checks the report's figures against those delays, and that
// the JSON and the HTML with its plots are written.
func TestKnownDelays(t *testing.T) {
	const ttft, gap = 80 * time.Millisecond, 10 * time.Millisecond
	// The OpenAI target sends a role-only chunk at once: not a first word.
	roleFirst := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		chunk := func(delta string) {
			fmt.Fprintf(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":null}]}`+"\n\n", delta)
			rc.Flush()
		}
		chunk(`{"role":"assistant","content":""}`)
		for i := range 21 {
			if i == 0 {
				time.Sleep(ttft)
			} else {
				time.Sleep(gap)
			}
			chunk(fmt.Sprintf(`{"content":" tok%d"}`, i))
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	// A target that holds chunks and writes them two at a time: about half
	// its gaps are bunched.
	pairs := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		time.Sleep(ttft)
		for i := range 10 {
			if i > 0 {
				time.Sleep(2 * gap)
			}
			for k := range 2 {
				fmt.Fprintf(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" t%d"},"finish_reason":null}]}`+"\n\n", 2*i+k)
			}
			rc.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	targets := []*Target{
		{Name: "openai", URL: serve(t, roleFirst) + "/v1/chat/completions"},
		{Name: "anthropic", URL: serve(t, newReplay(t, "anthropic_messages_stream.sse", func(e []byte) bool { return bytes.Contains(e, []byte("text_delta")) }, ttft, gap)) + "/v1/messages"},
		{Name: "responses", URL: serve(t, newReplay(t, "upstream_phase_text.sse", func(e []byte) bool { return bytes.Contains(e, []byte("output_text.delta")) }, ttft, gap)) + "/v1/responses"},
		{Name: "chat", URL: serve(t, chatTarget(ttft, gap, 20)) + "/v1/chat"},
		{Name: "pairs", URL: serve(t, pairs)},
	}
	rep, err := Run(context.Background(), Options{
		Targets: targets, Baseline: "openai", Concurrency: []int{1, 4}, Requests: 8, Rounds: 2,
		MaxTime: time.Minute, RequestTimeout: 10 * time.Second, MaxTokens: 64, Prompt: "hi", BunchAfter: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		texts int // text chunks after the first: the gaps per request
	}{{"openai", 20}, {"anthropic", 4}, {"responses", 3}, {"chat", 19}} {
		for _, conc := range []int{1, 4} {
			c := cellOf(t, rep, tc.name, conc)
			if c.OK != 8 || len(c.Errors) != 0 {
				t.Errorf("%s@%d: %d/8 ok, errors %v", tc.name, conc, c.OK, c.Errors)
				continue
			}
			// The first word comes after ttft, give or take a few ms: a
			// few more at concurrency 4 on a busy machine under -race.
			slack := 20.0
			if conc > 1 {
				slack = 50
			}
			if w := c.TTFW.P50; w < ms(ttft) || w > ms(ttft)+slack {
				t.Errorf("%s@%d: TTFW p50 %.1f ms, want %v to %v+%.0fms", tc.name, conc, w, ttft, ttft, slack)
			}
			if g := c.GapP50; g < ms(gap) || g > ms(gap)+8 {
				t.Errorf("%s@%d: gap p50 %.1f ms, want %v to %v+8ms", tc.name, conc, g, gap, gap)
			}
			if c.Gaps != 8*tc.texts {
				t.Errorf("%s@%d: %d gaps, want %d", tc.name, conc, c.Gaps, 8*tc.texts)
			}
			// Paced chunks are not bunched, but for the odd pair a busy
			// scheduler delays and then delivers together.
			if c.BunchedShare > 0.1 {
				t.Errorf("%s@%d: bunched share %.3f of paced chunks", tc.name, conc, c.BunchedShare)
			}
			if c.TTC.P50 < c.TTFW.P50+float64(tc.texts)*ms(gap) {
				t.Errorf("%s@%d: TTC p50 %.1f ms before the last chunk could come", tc.name, conc, c.TTC.P50)
			}
			if c.TTFW.CI50[0] > c.TTFW.P50 || c.TTFW.CI50[1] < c.TTFW.P50 {
				t.Errorf("%s@%d: CI %v does not hold p50 %v", tc.name, conc, c.TTFW.CI50, c.TTFW.P50)
			}
		}
	}
	for _, conc := range []int{1, 4} {
		// 19 gaps: 9 of 2×gap, each followed by one within the same write.
		if c := cellOf(t, rep, "pairs", conc); c.Gaps != 8*19 || c.BunchedShare < 0.4 || c.GapP50 > 1 {
			t.Errorf("pairs@%d: %d gaps, bunched share %.3f, gap p50 %.2f ms: want 152, about 9/19, under 1 ms", conc, c.Gaps, c.BunchedShare, c.GapP50)
		}
	}
	// Headers and the role chunk (openai), the meta event and a heartbeat
	// (chat) come at once: the first byte is far ahead of the first word.
	for _, name := range []string{"openai", "chat", "anthropic"} {
		if c := cellOf(t, rep, name, 1); c.TTFB.P50 > ms(ttft)/2 {
			t.Errorf("%s: TTFB p50 %.1f ms, want well under the first word's %v", name, c.TTFB.P50, ttft)
		}
	}
	if c := cellOf(t, rep, "chat", 1); c.AddedTTFWP50 == nil || c.TTFWRatio == nil {
		t.Errorf("chat: no comparison with the baseline: %+v", c)
	}

	dir := t.TempDir()
	jsonPath, htmlPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	if err := rep.WriteJSON(jsonPath); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Cells) != 10 || len(back.Cells[0].TTFWSamples) != 8 {
		t.Errorf("JSON read back: %d cells, want 10, with 8 TTFW samples each", len(back.Cells))
	}
	if err := rep.WriteHTML(htmlPath); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(htmlPath)
	for _, want := range []string{"Time to first word, CDF, concurrency 1", "Time to first word, CDF, concurrency 4",
		"Latency against concurrency: time to first word", "Chunk gaps, CDF, concurrency 4",
		"Time to first word over the run, concurrency 1", "Time to first word over the run, concurrency 4"} {
		i := bytes.Index(html, []byte(want))
		if i < 0 || !bytes.Contains(html[i:min(len(html), i+400)], []byte("<svg")) {
			t.Errorf("HTML: no plot %q", want)
		}
	}
	if n := bytes.Count(html, []byte("<svg")); n != 8 {
		t.Errorf("HTML: %d plots, want 8", n)
	}
	for _, bad := range []string{"<script", "src=", "<link", "@import"} {
		if bytes.Contains(html, []byte(bad)) {
			t.Errorf("HTML loads something (%q): not self-contained", bad)
		}
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if !strings.Contains(table.String(), "TTFW p50") || strings.Count(table.String(), "\n") < 9 {
		t.Errorf("table:\n%s", table.String())
	}
}
