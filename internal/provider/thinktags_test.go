package provider

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/firstword/firstword/internal/chat"
)

// chunkList is a provider answering with fixed chunks; as a listPuller it
// is also a Puller.
type chunkList []chat.Chunk

func (l chunkList) Stream(context.Context, *chat.Request) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		for _, c := range l {
			if !yield(c, nil) {
				return
			}
		}
	}
}

type listPuller struct{ chunkList }

func (l listPuller) Pull(context.Context, *chat.Request) Reader { return &listReader{cs: l.chunkList} }

type listReader struct {
	cs []chat.Chunk
	c  chat.Chunk
}

func (r *listReader) Next() (*chat.Chunk, error) {
	if len(r.cs) == 0 {
		return nil, io.EOF
	}
	r.c, r.cs = r.cs[0], r.cs[1:]
	return &r.c, nil
}

func (r *listReader) Close() {}

// both runs the chunks through ThinkTags on the stream path and on the
// pull path, and checks that they agree.
func both(t *testing.T, in []chat.Chunk) []chat.Chunk {
	t.Helper()
	var got [2][]chat.Chunk
	for i, p := range []Provider{ThinkTags(chunkList(in)), ThinkTags(listPuller{in})} {
		for c, err := range p.Stream(context.Background(), &chat.Request{}) {
			if err != nil {
				t.Fatal(err)
			}
			got[i] = append(got[i], c)
		}
	}
	if diff := cmp.Diff(got[0], got[1]); diff != "" {
		t.Fatalf("stream and pull paths differ (-stream +pull):\n%s", diff)
	}
	return got[0]
}

// texts is a chunk for each non-empty text (an empty chunk passes
// through as it came).
func texts(ss ...string) []chat.Chunk {
	var out []chat.Chunk
	for _, s := range ss {
		if s != "" {
			out = append(out, chat.Chunk{Text: s})
		}
	}
	return out
}

func joined(cs []chat.Chunk) (thinking, text string) {
	for _, c := range cs {
		thinking += c.Thinking
		text += c.Text
	}
	return thinking, text
}

var tagRows = []struct {
	name, in, thinking, text string
}{
	{"opened and closed", "<think>\nLet me see: 2+2.\n</think>\n\nIt is 4.", "Let me see: 2+2.\n", "It is 4."},
	{"only closed (R1 template)", "Okay, the user asks.\n</think>\n\nHello!", "Okay, the user asks.\n", "Hello!"},
	{"leading whitespace", "\n\n <think>a</think>b", "a", "b"},
	{"empty block (thinking off)", "<think>\n\n</think>\n\nAnswer", "", "Answer"},
	{"closed at once", "</think>Answer", "", "Answer"},
	{"later tags are answer", "<think>t</think>a <think>x</think> </think>", "t", "a <think>x</think> </think>"},
	{"never closed: all thinking", "<think>still thinking", "still thinking", ""},
	{"never opened nor closed", "plain words", "plain words", ""},
	{"a lone < is not a tag", "<b>bold</b></think>ok", "<b>bold</b>", "ok"},
	{"almost a close tag", "a </thin k> b</think>c", "a </thin k> b", "c"},
	{"multi-byte", "<think>думаю 🤔</think>Ответ: 4", "думаю 🤔", "Ответ: 4"},
	{"unfinished open tag at the end", "<thi", "<thi", ""},
	{"unfinished close tag at the end", "<think>x</thi", "x</thi", ""},
}

// TestThinkTags: every split of each text into chunks, at one and two
// places, gives the same thinking and answer, and nothing else.
func TestThinkTags(t *testing.T) {
	for _, tt := range tagRows {
		t.Run(tt.name, func(t *testing.T) {
			check := func(parts ...string) {
				t.Helper()
				got := both(t, texts(parts...))
				th, tx := joined(got)
				if th != tt.thinking || tx != tt.text {
					t.Fatalf("split %q: thinking %q, text %q; want %q, %q", parts, th, tx, tt.thinking, tt.text)
				}
				for _, c := range got {
					if c.Text == "" && c.Thinking == "" {
						t.Fatalf("split %q: an empty chunk %+v", parts, c)
					}
				}
			}
			check(tt.in)
			for i := 0; i <= len(tt.in); i++ {
				check(tt.in[:i], tt.in[i:])
				for j := i; j <= len(tt.in); j += 3 {
					check(tt.in[:i], tt.in[i:j], tt.in[j:])
				}
			}
		})
	}
}

// TestThinkTagsHoldsOnlyTags: once the answer began every chunk's text
// goes out with that chunk, and while thinking only a possible tag start
// is held.
func TestThinkTagsHoldsOnlyTags(t *testing.T) {
	in := texts("<think>", "a <", "/thi", "nk", "x", "</", "think>", "\n\nThe", " answer <", "/think", ">")
	got := both(t, in)
	want := []chat.Chunk{{Thinking: "a "}, {Thinking: "</thinkx"}, {Text: "The"}, {Text: " answer <"}, {Text: "/think"}, {Text: ">"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
}

// TestThinkTagsChunks: the other members of a chunk pass through; held
// bytes go out with a finish reason or a tool call, never after them;
// choices are apart; an upstream that separates thinking itself is left
// alone.
func TestThinkTagsChunks(t *testing.T) {
	u := &chat.Usage{InputTokens: 3, OutputTokens: 5}
	tests := []struct {
		name     string
		in, want []chat.Chunk
	}{
		{
			name: "model and usage kept, empty chunks dropped",
			in:   []chat.Chunk{{Model: "r1", Text: "<think>"}, {Text: "\n"}, {Text: "hmm</think>"}, {Text: "\n\n"}, {Text: "ok", More: true}, {FinishReason: chat.FinishStop, Usage: u}},
			want: []chat.Chunk{{Model: "r1"}, {Thinking: "hmm"}, {Text: "ok", More: true}, {FinishReason: chat.FinishStop, Usage: u}},
		},
		{
			name: "held bytes before the finish",
			in:   []chat.Chunk{{Text: "<think>a</thi"}, {FinishReason: chat.FinishLength}},
			want: []chat.Chunk{{Thinking: "a"}, {Thinking: "</thi", FinishReason: chat.FinishLength}},
		},
		{
			name: "held bytes before a tool call",
			in:   []chat.Chunk{{Text: "I will call </"}, {ToolCalls: []chat.ToolCallDelta{{ID: "c", Name: "f"}}}, {FinishReason: chat.FinishToolCalls}},
			want: []chat.Chunk{{Thinking: "I will call "}, {Thinking: "</", ToolCalls: []chat.ToolCallDelta{{ID: "c", Name: "f"}}}, {FinishReason: chat.FinishToolCalls}},
		},
		{
			name: "a partial tag in the finishing chunk's own text",
			in:   []chat.Chunk{{Text: "<think>a"}, {Text: "b</th", FinishReason: chat.FinishLength}},
			want: []chat.Chunk{{Thinking: "a"}, {Thinking: "b</th", FinishReason: chat.FinishLength}},
		},
		{
			name: "two choices",
			in:   []chat.Chunk{{Text: "<think>a"}, {Choice: 1, Text: "b</think>B"}, {Text: "</think>A"}, {Choice: 1, Text: "<think>"}},
			want: []chat.Chunk{{Thinking: "a"}, {Choice: 1, Thinking: "b", Text: "B"}, {Text: "A"}, {Choice: 1, Text: "<think>"}},
		},
		{
			name: "upstream thinking passes through",
			in:   []chat.Chunk{{Thinking: "t"}, {Thought: &chat.Thought{Signature: "s"}}, {Text: "<think>x</think>"}},
			want: []chat.Chunk{{Thinking: "t"}, {Thought: &chat.Thought{Signature: "s"}}, {Text: "<think>x</think>"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, both(t, tt.in)); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestThinkTagsPuller: the wrapper is a Puller exactly when the provider
// is, so the router keeps its direct pull path; an error ends the answer.
func TestThinkTagsPuller(t *testing.T) {
	if _, ok := ThinkTags(chunkList(nil)).(Puller); ok {
		t.Error("ThinkTags of a plain provider is a Puller")
	}
	p, ok := ThinkTags(listPuller{}).(Puller)
	if !ok {
		t.Fatal("ThinkTags of a Puller is not one")
	}
	r := p.Pull(context.Background(), &chat.Request{})
	defer r.Close()
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("Next() error = %v, want io.EOF", err)
	}
	var got error
	for _, err := range ThinkTags(errStream{}).Stream(context.Background(), &chat.Request{}) {
		got = err
	}
	if got == nil || !strings.Contains(got.Error(), "boom") {
		t.Errorf("error = %v, want boom", got)
	}
}

type errStream struct{}

func (errStream) Stream(context.Context, *chat.Request) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		if yield(chat.Chunk{Text: "<think>x</thi"}, nil) {
			yield(chat.Chunk{}, &chat.Error{Message: "boom"})
		}
	}
}

// TestThinkTagsBreak: a consumer may stop at any chunk.
func TestThinkTagsBreak(t *testing.T) {
	in := texts("<think>a", "b</th", "ink>c", "d")
	in = append(in, chat.Chunk{FinishReason: chat.FinishStop})
	for stop := range 5 {
		n := 0
		for _, err := range ThinkTags(chunkList(in)).Stream(context.Background(), &chat.Request{}) {
			if err != nil {
				t.Fatal(err)
			}
			if n == stop {
				break
			}
			n++
		}
	}
}

func FuzzThinkTags(f *testing.F) {
	for _, tt := range tagRows {
		f.Add(tt.in, 3)
	}
	f.Fuzz(func(t *testing.T, in string, step int) {
		if step <= 0 || step > 64 {
			step = 1
		}
		var parts []string
		for i := 0; i < len(in); i += step {
			parts = append(parts, in[i:min(i+step, len(in))])
		}
		th, tx := joined(both(t, texts(parts...)))
		wth, wtx := joined(both(t, texts(in)))
		if th != wth || tx != wtx {
			t.Fatalf("split by %d: %q, %q; whole: %q, %q", step, th, tx, wth, wtx)
		}
		// Nothing is lost but whitespace and the one pair of tags.
		if len(th)+len(tx) > len(in) {
			t.Fatalf("more out than in: %q, %q from %q", th, tx, in)
		}
	})
}
