package provider

import (
	"context"
	"io"
	"strings"

	"github.com/firstword/firstword/internal/chat"
)

// ThinkTags wraps p for a model that writes its thinking into the answer
// text between <think> and </think> (DeepSeek R1 and its distills, QwQ,
// Qwen3 behind servers without a reasoning parser): that text becomes
// Chunk.Thinking, the rest stays Text. The result is a Puller when p is.
//
// What counts as thinking, choice by choice:
//   - Leading whitespace is dropped. If the text then opens with <think>,
//     what follows up to </think> is thinking.
//   - If it opens with anything else, it is thinking too, up to the first
//     </think>: R1-style chat templates open the tag in the prompt, so the
//     model's output starts inside it. The deployment's thinking_tags says
//     the model works this way; a stream that never closes the tag is all
//     thinking and has no answer text.
//   - After the first </think> (and the whitespace after it) everything is
//     answer, tags included: only the leading block is thinking.
//   - A choice whose upstream already separates thinking (a Thinking
//     delta before any text) is passed through unchanged.
//
// Tags may be split across chunks ("<thi" + "nk>"): only the bytes that
// could still be the start of a tag are held back (at most len("</think>")
// - 1 of them), never the answer; they go out with the next chunk, with
// the chunk that carries a tool call or the finish reason (before them),
// or on their own at the end of the stream.
func ThinkTags(p Provider) Provider {
	if pl, ok := p.(Puller); ok {
		return thinkTagsPuller{pl}
	}
	return thinkTags{p}
}

const (
	openTag  = "<think>"
	closeTag = "</think>"
)

type thinkTags struct{ p Provider }

func (t thinkTags) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return func(yield func(chat.Chunk, error) bool) {
		var s tagSplitter
		for c, err := range t.p.Stream(ctx, req) {
			if err != nil {
				yield(chat.Chunk{}, err)
				return
			}
			if s.split(&c) && !yield(c, nil) {
				return
			}
		}
		for {
			f, ok := s.flush()
			if !ok || !yield(f, nil) {
				return
			}
		}
	}
}

type thinkTagsPuller struct{ p Puller }

func (t thinkTagsPuller) Stream(ctx context.Context, req *chat.Request) chat.Stream {
	return Range(t.Pull(ctx, req))
}

func (t thinkTagsPuller) Pull(ctx context.Context, req *chat.Request) Reader {
	return &tagReader{r: t.p.Pull(ctx, req)}
}

// tagReader is ThinkTags on the pull path: the inner reader's chunks,
// split, in a chunk of its own (the inner reader's is not changed).
type tagReader struct {
	r     Reader
	s     tagSplitter
	c     chat.Chunk
	ended bool // the inner reader returned io.EOF
}

func (r *tagReader) Next() (*chat.Chunk, error) {
	for {
		if r.ended {
			f, ok := r.s.flush()
			if !ok {
				return nil, io.EOF
			}
			r.c = f
			return &r.c, nil
		}
		c, err := r.r.Next()
		if err == io.EOF {
			r.ended = true
			continue
		}
		if err != nil {
			return nil, err
		}
		r.c = *c
		if r.s.split(&r.c) {
			return &r.c, nil
		}
	}
}

func (r *tagReader) Close() { r.r.Close() }

// tagMode is where a choice's text is.
type tagMode uint8

const (
	tagStart    tagMode = iota // nothing but whitespace yet
	tagThinking                // inside the leading think block
	tagAnswer                  // after it, or passing through
)

// tagState is one choice's.
type tagState struct {
	mode tagMode
	// trim: whitespace is being dropped (the start of the thinking, or of
	// the answer after </think>).
	trim bool
	// held is the end of the text so far that may be the start of a tag.
	held string
}

// tagSplitter splits the text of a stream's chunks, choice by choice.
type tagSplitter struct {
	choices []tagState
}

func (s *tagSplitter) state(choice int) *tagState {
	if choice < 0 || choice >= chat.MaxChoices {
		return nil // a reader upstream reports the bad index
	}
	if choice >= len(s.choices) {
		s.choices = append(s.choices, make([]tagState, choice+1-len(s.choices))...)
	}
	return &s.choices[choice]
}

// flush returns the held bytes of the first choice that has any, as a
// chunk, at the end of the stream; ok is false when none is left.
func (s *tagSplitter) flush() (chat.Chunk, bool) {
	for i := range s.choices {
		if s.choices[i].held != "" {
			return s.choices[i].flush(i), true
		}
	}
	return chat.Chunk{}, false
}

// flush empties the held bytes: they were not a tag after all, so they
// are the text of the mode the choice is in (at the start, thinking: an
// unfinished "<thi" is not an answer either).
func (st *tagState) flush(choice int) chat.Chunk {
	c := chat.Chunk{Choice: choice}
	if st.mode == tagAnswer {
		c.Text = st.held
	} else {
		c.Thinking = st.held
	}
	st.held = ""
	return c
}

// split rewrites c's text into its thinking and answer parts, and
// reports whether c still carries anything.
func (s *tagSplitter) split(c *chat.Chunk) bool {
	st := s.state(c.Choice)
	if st == nil {
		return true
	}
	if c.Thinking != "" && st.mode == tagStart {
		// The upstream separates thinking itself.
		st.mode = tagAnswer
	}
	if c.Text != "" && (st.mode != tagAnswer || st.trim) {
		var thinking string
		thinking, c.Text = st.split(c.Text)
		c.Thinking += thinking
	}
	if st.held != "" && (c.FinishReason != "" || len(c.ToolCalls) > 0) {
		// What ends the choice's text, or a tool call, must not overtake
		// the held bytes: they were not a tag, and go out with it.
		f := st.flush(c.Choice)
		c.Thinking += f.Thinking
		c.Text += f.Text
	}
	return c.Text != "" || c.Thinking != "" || c.Thought != nil || c.Refusal != "" || len(c.ToolCalls) > 0 ||
		c.FinishReason != "" || c.Usage != nil || c.UsageSoFar != nil || c.Model != ""
}

// split takes one text delta and returns what of it (and of the held
// bytes) is thinking and what is answer. Each is one piece of the input
// (thinking comes before the answer and never after it), so a delta
// costs no allocation unless bytes were held.
func (st *tagState) split(delta string) (thinking, text string) {
	in := delta
	if st.held != "" {
		in = st.held + delta
		st.held = ""
	}
	for in != "" {
		switch st.mode {
		case tagStart:
			in = strings.TrimLeft(in, " \t\r\n")
			switch {
			case in == "":
			case strings.HasPrefix(in, openTag):
				in = in[len(openTag):]
				st.mode, st.trim = tagThinking, true
			case strings.HasPrefix(openTag, in) || strings.HasPrefix(closeTag, in):
				st.held, in = in, "" // "<thi": wait for the rest
			default:
				// No opening tag: the template opened it (see ThinkTags).
				st.mode = tagThinking
			}
		case tagThinking:
			if st.trim {
				if in = strings.TrimLeft(in, " \t\r\n"); in == "" {
					break
				}
				st.trim = false
			}
			if i := strings.Index(in, closeTag); i >= 0 {
				thinking, in = in[:i], in[i+len(closeTag):]
				st.mode, st.trim = tagAnswer, true
				continue
			}
			n := partialTag(in, closeTag)
			thinking, st.held, in = in[:len(in)-n], in[len(in)-n:], ""
		case tagAnswer:
			if st.trim {
				if in = strings.TrimLeft(in, " \t\r\n"); in == "" {
					break
				}
				st.trim = false
			}
			text, in = in, ""
		}
	}
	return thinking, text
}

// partialTag is the length of the longest end of s that is a proper
// prefix of tag: bytes that may be the start of tag, split across chunks.
func partialTag(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if s[len(s)-n:] == tag[:n] {
			return n
		}
	}
	return 0
}
