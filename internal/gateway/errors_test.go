package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/gateway/gatewaytest"
	"github.com/firstword/firstword/internal/metering"
)

const oneAttempt = "    max_attempts: 1\n"

// TestErrorsBeforeFirstByte: upstream failures before anything was sent
// become proper statuses with OpenAI-style error JSON.
func TestErrorsBeforeFirstByte(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		header     string
		wantStatus int
		wantCode   string
	}{
		{"server error", 500, `{"error":{"message":"boom","type":"server_error"}}`, "", 502, "upstream_unavailable"},
		{"overloaded", 503, `{"error":{"message":"busy"}}`, "", 503, "overloaded"},
		{"rate limited", 429, `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`, "7", 429, "rate_limited"},
		{"bad request", 400, `{"error":{"message":"bad param","type":"invalid_request_error"}}`, "", 400, "invalid_request"},
		{"context length", 400, `{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`, "", 400, "context_length_exceeded"},
		{"upstream auth", 401, `{"error":{"message":"bad key"}}`, "", 502, "auth"},
		{"html error page", 502, `<html>bad gateway</html>`, "", 502, "upstream_unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
			for _, stream := range []string{"true", "false"} {
				resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`)
				checkErrorResponse(t, resp, tt.wantStatus, tt.wantCode)
				if tt.header != "" && resp.Header.Get("Retry-After") != tt.header {
					t.Errorf("Retry-After = %q, want %q", resp.Header.Get("Retry-After"), tt.header)
				}
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, "http://"+addr)
		resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		checkErrorResponse(t, resp, 502, "upstream_unavailable")
	})
}

// TestUpstreamOKButNoAnswer: a 200 that is not an answer (a web page, an
// error object, a completion without choices) is an error, not an empty
// success.
func TestUpstreamOKButNoAnswer(t *testing.T) {
	for _, tt := range []struct {
		name, ctype, body, wantMsg string
		status                     int
	}{
		{"html page", "text/html; charset=utf-8", "<html><body>Welcome to nginx!</body></html>", "HTML page", 502},
		// The upstream's spent quota keeps its code (issue 34).
		{"error object", "application/json", `{"error":{"message":"quota exceeded","type":"insufficient_quota"}}`, `"code":"insufficient_quota"`, 429},
		{"no choices", "application/json", `{"id":"x","object":"chat.completion","choices":[]}`, "without choices", 502},
		{"only [DONE]", "text/event-stream", "data: [DONE]\n\n", "before any chunk", 502},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.ctype)
				io.WriteString(w, tt.body)
			})
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
			for _, stream := range []string{"true", "false"} {
				resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.wantMsg) || strings.Contains(string(b), "[DONE]") {
					t.Errorf("stream=%s: %d %s; want %d saying %q", stream, resp.StatusCode, b, tt.status, tt.wantMsg)
				}
			}
		})
	}
}

// TestUpstreamAnsweredWhole: an upstream that ignores stream:true and
// answers with a whole completion is streamed to a client that asked for
// a stream, and answered whole to one that did not.
func TestUpstreamAnsweredWhole(t *testing.T) {
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello whole"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
	})
	gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
	resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"content":"Hello whole"`) || !strings.Contains(string(b), `"finish_reason":"stop"`) ||
		!strings.Contains(string(b), `"completion_tokens":2`) || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Errorf("stream: %d %s", resp.StatusCode, b)
	}
	resp = gatewaytest.Post(t, gw.URL, `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"content":"Hello whole"`) || !strings.Contains(string(b), `"prompt_tokens":3`) {
		t.Errorf("whole: %d %s", resp.StatusCode, b)
	}
}

func checkErrorResponse(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
			Param   any    `json:"param"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("status %d, body %q is not JSON: %v", resp.StatusCode, b, err)
	}
	if resp.StatusCode != status || body.Error.Code != code || body.Error.Message == "" {
		t.Errorf("got %d %s, want %d with code %s", resp.StatusCode, b, status, code)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q", ct)
	}
}

// TestErrorsMidStream: once text was sent, an upstream failure of any kind
// ends the stream with an error event and no [DONE], keeping the text.
func TestErrorsMidStream(t *testing.T) {
	hello := gatewaytest.ChunkJSON("Hello") + gatewaytest.ChunkJSON(" world")
	finish := `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	tests := []struct {
		name string
		tail string
	}{
		{"truncated json", `data: {"choices":[{"index":0,"delta":{"content":"x` + "\n\n"},
		{"invalid utf-8", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xc3\x28\"}}]}\n\n"},
		{"10 MB line", "data: " + strings.Repeat("a", 10<<20) + "\n\n"},
		{"missing [DONE]", finish},
		{"closed early", ""},
		{"error object", `data: {"error":{"message":"upstream exploded","type":"server_error"}}` + "\n\n"},
		{"event: error", "event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"overloaded_error\"}}\n\n"},
	}
	for _, tt := range tests {
		// Separately, and in one write, so that the text and the failure
		// arrive in one read.
		for _, together := range []bool{false, true} {
			name := tt.name
			if together {
				name += " in one read"
			}
			t.Run(name, func(t *testing.T) { testErrorMidStream(t, hello, tt.tail, together) })
		}
	}
}

func testErrorMidStream(t *testing.T, hello, tail string, together bool) {
	up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		gatewaytest.SSEHeaders(w)
		if together {
			gatewaytest.SSEWrite(w, hello+tail)
			return
		}
		gatewaytest.SSEWrite(w, hello)
		gatewaytest.SSEWrite(w, tail)
	})
	gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
	resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if resp.Header.Get("X-Firstword-Deployment") != "local/mock-model" || resp.Header.Get("Server-Timing") == "" {
		t.Errorf("route headers missing: %v", resp.Header)
	}
	events := gatewaytest.ReadEvents(resp.Body)
	var text strings.Builder
	for _, ev := range events[:len(events)-1] {
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(ev.Data), &c) == nil && len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if text.String() != "Hello world" {
		t.Errorf("text before the error = %q, want %q", text.String(), "Hello world")
	}
	last := events[len(events)-1]
	var e struct {
		Error *struct{ Message, Type, Code string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(last.Data), &e); err != nil || e.Error == nil || e.Error.Message == "" {
		t.Fatalf("last event %q is not an error event", last.Data)
	}
	for _, ev := range events {
		if ev.Data == "[DONE]" {
			t.Error("a broken stream ended with [DONE]")
		}
		if strings.Contains(ev.Data, `"finish_reason":"stop"`) {
			t.Error("a broken stream reported finish_reason stop")
		}
	}
	rec := waitRecord(t, gw, resp.Header.Get("X-Request-Id"))
	if rec.Status != metering.StatusError || rec.ErrorCode == "" {
		t.Errorf("record status %s code %q, want error", rec.Status, rec.ErrorCode)
	}
}

// TestBadClientRequests: malformed requests get a 4xx naming the problem.
func TestBadClientRequests(t *testing.T) {
	gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig, "http://127.0.0.1:1")
	tests := []struct {
		name, body string
		status     int
		param      string
	}{
		{"not json", `{"model":`, 400, ""},
		{"not an object", `[1,2]`, 400, ""},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "model"},
		{"model wrong type", `{"model":5,"messages":[{"role":"user","content":"hi"}]}`, 400, "model"},
		{"no messages", `{"model":"chat"}`, 400, "messages"},
		{"empty messages", `{"model":"chat","messages":[]}`, 400, "messages"},
		{"messages wrong type", `{"model":"chat","messages":"hi"}`, 400, "messages"},
		{"bad role", `{"model":"chat","messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages[0]"},
		{"temperature wrong type", `{"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`, 400, "temperature"},
		{"max_tokens negative", `{"model":"chat","messages":[{"role":"user","content":"hi"}],"max_tokens":-1}`, 400, "max_tokens"},
		{"stream wrong type", `{"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":"yes"}`, 400, "stream"},
		{"stream_options without stream", `{"model":"chat","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, 400, "stream_options"},
		{"stream_options unknown key", `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}],"stream_options":{"usage":true}}`, 400, "stream_options"},
		{"stream_options wrong type", `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":"yes"}}`, 400, "stream_options"},
		{"unknown model", `{"model":"gpt-9","messages":[{"role":"user","content":"hi"}]}`, 404, "model"},
		{"oversized body", `{"model":"chat","messages":[{"role":"user","content":"` + strings.Repeat("x", 5<<20) + `"}]}`, 413, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := gatewaytest.Post(t, gw.URL, tt.body)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var body struct {
				Error struct {
					Message string  `json:"message"`
					Param   *string `json:"param"`
					Code    string  `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("body %q is not JSON", b)
			}
			if want, ok := map[string]string{"no model": "missing_model", "model wrong type": "invalid_request"}[tt.name]; ok && body.Error.Code != want {
				t.Errorf("code = %q, want %q", body.Error.Code, want)
			}
			if resp.StatusCode != tt.status || body.Error.Message == "" {
				t.Errorf("got %d %s, want %d", resp.StatusCode, b, tt.status)
			}
			if tt.param != "" && (body.Error.Param == nil || *body.Error.Param != tt.param) {
				t.Errorf("param = %v, want %q (%s)", body.Error.Param, tt.param, b)
			}
		})
	}
}

// An upstream reporting usage no request can have (negative, or beyond
// any context window) is neither billed nor shown: the request is metered
// as if no usage came, estimated and flagged, and nothing panics.
func TestImplausibleUpstreamUsage(t *testing.T) {
	for _, tc := range []struct{ name, usage string }{
		{"negative", `{"prompt_tokens":-5,"completion_tokens":-1000000,"total_tokens":-1000005}`},
		{"huge", `{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807,"total_tokens":-2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				gatewaytest.SSEHeaders(w)
				gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("Hello")+
					`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n"+
					`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":`+tc.usage+"}\n\n"+
					"data: [DONE]\n\n")
			})
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
			for _, stream := range []bool{true, false} {
				opts := ""
				if stream {
					opts = `"stream_options":{"include_usage":true},`
				}
				resp := gatewaytest.Post(t, gw.URL, fmt.Sprintf(`{"model":"chat","stream":%v,%s"messages":[{"role":"user","content":"hi"}]}`, stream, opts))
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("stream=%v: reading the answer: %v (the connection broke)", stream, err)
				}
				id := resp.Header.Get("X-Request-Id")
				if stream && (!strings.HasSuffix(string(b), "data: [DONE]\n\n") || strings.Contains(string(b), "-100000") || strings.Contains(string(b), "922337")) {
					t.Errorf("stream: %s", b)
				}
				if !stream && (resp.StatusCode != 200 || strings.Contains(string(b), "-100000") || strings.Contains(string(b), "922337")) {
					t.Errorf("whole: %d %s", resp.StatusCode, b)
				}
				rec, ok := gw.Meter().Find(id)
				if !ok {
					t.Fatalf("stream=%v: no record for %s", stream, id)
				}
				u := rec.Usage
				if !u.Estimated || !rec.UsageMissing || u.InputTokens <= 0 || u.InputTokens > 100 || u.OutputTokens <= 0 || u.OutputTokens > 100 {
					t.Errorf("stream=%v: metered %+v, usage_missing=%v; want a small estimate, flagged", stream, u, rec.UsageMissing)
				}
			}
		})
	}
}

// A connection reset by the upstream reaches the client as the connection
// lost, never as the socket's addresses, before the first byte and after.
func TestUpstreamConnectionReset(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first string // sent before the reset
	}{
		{"after headers", ""},
		{"mid-stream", gatewaytest.ChunkJSON("Hello")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				gatewaytest.SSEHeaders(w)
				if tc.first != "" {
					gatewaytest.SSEWrite(w, tc.first)
				}
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				conn.(*net.TCPConn).SetLinger(0) // close sends a reset
				conn.Close()
			})
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
			resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body := string(b)
			host := strings.TrimPrefix(up.URL, "http://")
			host = host[:strings.LastIndex(host, ":")]
			if strings.Contains(body, host) || !strings.Contains(body, "upstream connection lost") || !strings.Contains(body, `"upstream_unavailable"`) {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
			if tc.first == "" && resp.StatusCode != http.StatusBadGateway && resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("before any token: status %d, want 502 or 503", resp.StatusCode)
			}
			if tc.first != "" && (resp.StatusCode != 200 || strings.Contains(body, "[DONE]")) {
				t.Errorf("mid-stream: status %d, body %s", resp.StatusCode, body)
			}
		})
	}
}

// An upstream that keeps its response open after [DONE] does not hold
// back the client's ending; one that ends its response, at once or a
// little later, has its connection reused by the next request.
func TestEndMarkerEndsTheStream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // from [DONE] to the end of the response; < 0: kept open
	}{{"ends at once", 0}, {"ends 20ms later", 20 * time.Millisecond}, {"kept open", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var doneAt atomic.Int64
			var mu sync.Mutex
			conns := map[string]bool{} // by the gateway's address
			up := gatewaytest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				conns[r.RemoteAddr] = true
				mu.Unlock()
				gatewaytest.SSEHeaders(w)
				gatewaytest.SSEWrite(w, gatewaytest.ChunkJSON("Hello"))
				doneAt.Store(time.Now().UnixNano())
				gatewaytest.SSEWrite(w, gatewaytest.FinishJSON)
				if tc.after >= 0 {
					time.Sleep(tc.after)
					return
				}
				select {
				case <-release:
				case <-r.Context().Done():
				}
			})
			defer close(release)
			gw := gatewaytest.StartYAML(t, gatewaytest.MinimalConfig+oneAttempt, up.URL)
			for range 3 {
				resp := gatewaytest.Post(t, gw.URL, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
				events := gatewaytest.ReadEvents(resp.Body)
				resp.Body.Close()
				if len(events) == 0 || events[len(events)-1].Data != "[DONE]" {
					t.Fatalf("stream did not end with [DONE]: %v", events)
				}
				if late := events[len(events)-1].At.Sub(time.Unix(0, doneAt.Load())); late > 50*time.Millisecond {
					t.Errorf("[DONE] reached the client %v after the upstream sent it", late)
				}
				// The response's end, and the connection back in the pool
				// (read to its end in the background), with room for a
				// busy machine.
				time.Sleep(2*tc.after + 100*time.Millisecond)
			}
			mu.Lock()
			n := len(conns)
			mu.Unlock()
			if tc.after >= 0 && n != 1 {
				t.Errorf("three requests in turn opened %d upstream connections, want 1 (reused)", n)
			}
		})
	}
}
