package openai

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// simpleRequests are bodies of the shape parseSimpleRequest decodes (the
// first four), and near misses it must leave to parseRequest.
var simpleRequests = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"o3","reasoning_effort":"high","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"héllo \u00e9\n\"x\""},{"role":"assistant","content":""}],"max_tokens":64,"max_completion_tokens":32,"temperature":0.7,"top_p":1,"n":2,"seed":-5,"user":"u1"}`,
	` { "model" : "m" , "messages" : [ { "content" : "x" , "role" : "developer" } ] , "stream" : false } `,
	`{"model":"m","stream":false,"stream_options":{},"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","reasoning_effort":"max","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","reasoning_effort":"","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","reasoning_effort":"low","thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":3}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":0}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":null}`,
	`{"model":"m","model":"n","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"tool","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi","name":"x"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"\xff"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}]} {}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1e2}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":1e400}`,
	`{"model":"","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[]}`,
	`{"Model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"Role":"user","content":"hi"}]}`,
}

func TestParseSimpleRequest(t *testing.T) {
	for i, body := range simpleRequests {
		if fast := checkSimpleRequest(t, []byte(body)); fast != (i < 4) {
			t.Errorf("%s: fast path %v, want %v", body, fast, i < 4)
		}
	}
}

// checkSimpleRequest compares the fast path with the full parser and
// reports whether the fast path decoded body.
func checkSimpleRequest(t *testing.T, body []byte) bool {
	t.Helper()
	got, ok := parseSimpleRequest(body)
	if !ok {
		return false
	}
	want, err := parseRequest(body)
	if err != nil {
		t.Fatalf("%s: the fast path accepted what ParseRequest refuses: %v", body, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: fast path differs (-full +fast):\n%s", body, diff)
	}
	return true
}

func FuzzParseSimpleRequest(f *testing.F) {
	for _, s := range simpleRequests {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkSimpleRequest(t, b) })
}

func BenchmarkParseRequest(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is the capital of France?"}],"max_tokens":256,"temperature":0.7}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParseRequest(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseRequest(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
