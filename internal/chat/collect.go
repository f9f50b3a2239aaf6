package chat

import (
	"strings"
)

// Response is a whole answer, collected from a stream.
type Response struct {
	Model   string
	Choices []Choice
	Usage   *Usage
}

// Choice is one collected choice.
type Choice struct {
	Index        int
	Text         string
	Refusal      string
	ToolCalls    []ToolCall
	FinishReason FinishReason
	// Thinking is the choice's thinking, block by block.
	Thinking []ThinkingBlock
}

// Bounds on indices a stream may use; decoders reject larger ones.
const (
	MaxChoices   = 128
	MaxToolCalls = 128
)

// Collector assembles a Response from chunks, one Add at a time.
type Collector struct {
	resp  Response
	texts []*strings.Builder
	refs  []*strings.Builder
	args  [][]*strings.Builder
	think []*ThinkingCollector
}

// Add folds one chunk into the response.
func (c *Collector) Add(ch Chunk) {
	if ch.Model != "" && c.resp.Model == "" {
		c.resp.Model = ch.Model
	}
	if ch.Usage != nil {
		u := *ch.Usage
		c.resp.Usage = &u
	}
	if !ch.Visible() && ch.FinishReason == "" && !ch.Thinks() {
		return
	}
	if ch.Thought != nil && ch.Thought.Restart {
		// The router's restart is for every choice of the failed attempt.
		for _, t := range c.think {
			if t != nil {
				*t = ThinkingCollector{}
			}
		}
	}
	if ch.Choice < 0 || ch.Choice >= MaxChoices {
		return
	}
	for len(c.resp.Choices) <= ch.Choice {
		c.resp.Choices = append(c.resp.Choices, Choice{Index: len(c.resp.Choices)})
		c.texts = append(c.texts, new(strings.Builder))
		c.refs = append(c.refs, new(strings.Builder))
		c.args = append(c.args, nil)
		c.think = append(c.think, nil)
	}
	i := ch.Choice
	choice := &c.resp.Choices[i]
	if ch.Thinks() {
		if c.think[i] == nil {
			c.think[i] = new(ThinkingCollector)
		}
		c.think[i].Add(&ch)
	}
	c.texts[i].WriteString(ch.Text)
	c.refs[i].WriteString(ch.Refusal)
	for _, d := range ch.ToolCalls {
		if d.Index < 0 || d.Index >= MaxToolCalls {
			continue
		}
		for len(choice.ToolCalls) <= d.Index {
			choice.ToolCalls = append(choice.ToolCalls, ToolCall{})
			c.args[i] = append(c.args[i], new(strings.Builder))
		}
		tc := &choice.ToolCalls[d.Index]
		if d.ID != "" {
			tc.ID = d.ID
		}
		if d.Name != "" {
			tc.Name = d.Name
		}
		c.args[i][d.Index].WriteString(d.Arguments)
	}
	if ch.FinishReason != "" {
		choice.FinishReason = ch.FinishReason
	}
}

// Response returns the collected response.
func (c *Collector) Response() *Response {
	r := c.resp
	r.Choices = append([]Choice(nil), c.resp.Choices...)
	for i := range r.Choices {
		r.Choices[i].Text = c.texts[i].String()
		r.Choices[i].Refusal = c.refs[i].String()
		tcs := append([]ToolCall(nil), r.Choices[i].ToolCalls...)
		for j := range tcs {
			tcs[j].Arguments = c.args[i][j].String()
		}
		r.Choices[i].ToolCalls = tcs
		if c.think[i] != nil {
			r.Choices[i].Thinking = c.think[i].Blocks()
		}
	}
	return &r
}

// Collect drains a stream into a Response. It returns the chunks collected
// so far and the first error.
func Collect(s Stream) (*Response, error) {
	var c Collector
	for ch, err := range s {
		if err != nil {
			return c.Response(), err
		}
		c.Add(ch)
	}
	return c.Response(), nil
}
