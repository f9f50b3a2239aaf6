package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// wantThinking is what a stream's bytes say, read apart from the reader
// under test: each delta's reasoning_content (or reasoning when that is
// empty) joined, and its content joined.
func wantThinking(t *testing.T, raw []byte) (thinking, text string) {
	t.Helper()
	var th, tx strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta map[string]any `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			r, _ := ch.Delta["reasoning_content"].(string)
			if r == "" {
				r, _ = ch.Delta["reasoning"].(string)
			}
			th.WriteString(r)
			s, _ := ch.Delta["content"].(string)
			tx.WriteString(s)
		}
	}
	return th.String(), tx.String()
}

// TestReadStreamThinking reads recorded streams of reasoning models:
// every thinking byte becomes Chunk.Thinking, none of it Text, and all of
// it comes before the answer, read whole, a byte at a time and at random
// splits.
func TestReadStreamThinking(t *testing.T) {
	tests := []struct {
		file       string
		textPrefix string
		usage      *chat.Usage
	}{
		{"deepseek_reasoning.sse", "The word", &chat.Usage{InputTokens: 18, OutputTokens: 219, ReasoningTokens: 205}},
		{"groq_reasoning.sse", "The word", &chat.Usage{InputTokens: 17, OutputTokens: 1107, ReasoningTokens: 963}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			thinking, text := wantThinking(t, raw)
			if thinking == "" || text == "" {
				t.Fatalf("the recording has thinking %d bytes, text %d bytes", len(thinking), len(text))
			}
			readers := map[string]func() io.Reader{
				"whole":   func() io.Reader { return bytes.NewReader(raw) },
				"onebyte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(raw)) },
				"random":  func() io.Reader { return &splitReader{b: raw, rng: rand.New(rand.NewPCG(5, 6))} },
			}
			for name, mk := range readers {
				var gotThinking, gotText strings.Builder
				var usage *chat.Usage
				for c, err := range pull(mk(), 0) {
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if c.Thinking != "" && gotText.Len() > 0 {
						t.Fatalf("%s: thinking %q after the answer began", name, c.Thinking)
					}
					gotThinking.WriteString(c.Thinking)
					gotText.WriteString(c.Text)
					if c.Usage != nil {
						usage = c.Usage
					}
				}
				if gotThinking.String() != thinking {
					t.Errorf("%s: thinking differs:\n got %q\nwant %q", name, gotThinking.String(), thinking)
				}
				if gotText.String() != text {
					t.Errorf("%s: text = %q, want %q", name, gotText.String(), text)
				}
				if !strings.HasPrefix(text, tt.textPrefix) {
					t.Errorf("%s: text %q does not start %q", name, text, tt.textPrefix)
				}
				if diff := cmp.Diff(tt.usage, usage); diff != "" {
					t.Errorf("%s: usage (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

// TestReadStreamThinkingShapes: the field names servers use, alone and
// together, and a thinking delta that is the stream's only content.
func TestReadStreamThinkingShapes(t *testing.T) {
	ev := func(delta string) string {
		return `data: {"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	end := `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
	tests := []struct {
		name, in       string
		thinking, text string
	}{
		{"reasoning_content", ev(`{"role":"assistant","content":null,"reasoning_content":"a"}`) + ev(`{"reasoning_content":"b","content":null}`) + ev(`{"content":"c","reasoning_content":null}`) + end, "ab", "c"},
		{"reasoning", ev(`{"reasoning":"a"}`) + ev(`{"content":"c"}`) + end, "a", "c"},
		{"openrouter details not doubled", ev(`{"content":"","reasoning":"a","reasoning_details":[{"type":"reasoning.text","text":"a","index":0}]}`) +
			ev(`{"content":"","reasoning":null,"reasoning_details":[{"type":"reasoning.encrypted","data":"opaque","index":1}]}`) + ev(`{"content":"c"}`) + end, "a", "c"},
		{"both: reasoning_content wins", ev(`{"reasoning_content":"a","reasoning":"a"}`) + end, "a", ""},
		{"thinking only", ev(`{"reasoning_content":"only"}`) + end, "only", ""},
		{"thinking and text in one delta", ev(`{"reasoning_content":"t","content":"x"}`) + end, "t", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := collect(t, strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			ch := resp.Choices[0]
			var th string
			for _, b := range ch.Thinking {
				th += b.Text
			}
			if th != tt.thinking || ch.Text != tt.text {
				t.Errorf("thinking %q, text %q; want %q, %q", th, ch.Text, tt.thinking, tt.text)
			}
		})
	}
}

// TestCompletionChunksThinking: a whole completion's message carries its
// thinking in reasoning_content (recorded: the Vercel AI SDK's
// deepseek-reasoning.json fixture, see testdata/SOURCES.md) or reasoning.
func TestCompletionChunksThinking(t *testing.T) {
	raw, err := os.ReadFile("testdata/deepseek_reasoning_completion.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Choices []struct {
			Message struct {
				Content          string
				ReasoningContent string `json:"reasoning_content"`
			}
		}
	}
	if json.Unmarshal(raw, &rec) != nil || len(rec.Choices) != 1 || rec.Choices[0].Message.ReasoningContent == "" {
		t.Fatalf("the recording is not a completion with reasoning_content")
	}
	for _, tt := range []struct {
		name, body, thinking, text string
	}{
		{"recorded", string(raw), rec.Choices[0].Message.ReasoningContent, rec.Choices[0].Message.Content},
		{"reasoning", `{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"c","reasoning":"r"},"finish_reason":"stop"}]}`, "r", "c"},
	} {
		chunks, err := CompletionChunks(strings.NewReader(tt.body))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(chunks) != 1 || chunks[0].Thinking != tt.thinking || chunks[0].Text != tt.text {
			t.Errorf("%s: chunks = %+v, want thinking %q and text %q", tt.name, chunks, tt.thinking, tt.text)
		}
	}
}

// TestEncodeRequestThinking: the effort asked for is sent as
// reasoning_effort (a budget as the nearest effort; "none" not at all),
// and an assistant turn's thinking is never sent.
func TestEncodeRequestThinking(t *testing.T) {
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: "q"},
		{Role: chat.RoleAssistant, Content: "a", Thinking: []chat.ThinkingBlock{{Text: "secret thought", Signature: "sig", Format: chat.ThinkingAnthropic}}},
		{Role: chat.RoleUser, Content: "q2"},
	}
	for _, tt := range []struct {
		ask  *chat.ThinkingAsk
		want string
	}{
		{nil, ""},
		{&chat.ThinkingAsk{Effort: "low"}, "low"},
		{&chat.ThinkingAsk{Effort: "high", BudgetTokens: 100}, "high"},
		{&chat.ThinkingAsk{BudgetTokens: 8000}, "medium"},
		{&chat.ThinkingAsk{Effort: "none"}, ""},
		{&chat.ThinkingAsk{}, ""},
	} {
		for _, tools := range []bool{false, true} {
			req := &chat.Request{Model: "m", Messages: msgs, Thinking: tt.ask}
			if tools {
				req.Tools = []chat.Tool{{Name: "f"}} // the general path
			}
			b, err := EncodeRequest(req, "")
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Effort   *string          `json:"reasoning_effort"`
				Messages []map[string]any `json:"messages"`
			}
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatal(err)
			}
			got := ""
			if body.Effort != nil {
				got = *body.Effort
				if got == "" {
					t.Errorf("%+v: an empty reasoning_effort was sent", tt.ask)
				}
			}
			if got != tt.want {
				t.Errorf("%+v (tools %v): reasoning_effort = %q, want %q", tt.ask, tools, got, tt.want)
			}
			if bytes.Contains(b, []byte("secret thought")) || bytes.Contains(b, []byte("reasoning_content")) || len(body.Messages[1]) != 2 {
				t.Errorf("the assistant turn's thinking was sent: %s", b)
			}
		}
	}
}
