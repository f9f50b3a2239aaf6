package responses

import (
	"strconv"

	"github.com/firstword/firstword/internal/chat"
	"github.com/firstword/firstword/internal/wire/openai"
)

// EventEncoder writes a Responses API event stream, emitting the events
// OpenAI emits: response.created and response.in_progress, then for each
// output item output_item.added, its deltas (output_text.delta inside a
// content part, or function_call_arguments.delta) and its .done events,
// and finally one terminal event: response.completed, response.incomplete
// (the answer was cut: max_output_tokens, content_filter, or timeout when
// firstword's deadline cut it) or response.failed. Every event carries its
// sequence_number. Each method appends complete events to b. Only choice 0
// is encoded. Not safe for concurrent use.
type EventEncoder struct {
	ID        string
	Model     string
	CreatedAt int64
	// Background marks a background response (background: true): its
	// response objects say "background":true and response.created has
	// status queued, as OpenAI's do.
	Background bool
	// Summary: the client asked for reasoning summaries
	// (reasoning.summary): the model's thinking is written as a reasoning
	// item's summary text, streamed. Encrypted: the client asked for
	// reasoning.encrypted_content (include): a reasoning item carries the
	// encrypted content a Responses upstream signed it with. With
	// neither, as OpenAI, the client is sent no reasoning items.
	Summary, Encrypted bool

	seq     int
	started bool
	items   []outItem
	open    int   // index in items of the open message, or -1
	think   int   // index in items of the open reasoning item, or -1
	tools   []int // chat tool-call index → index in items plus one
	// name is the upstream's id for the next reasoning item, when a
	// Thought told it before the item opened.
	name string
}

type outItem struct {
	function  bool
	reasoning bool
	id        string
	callID    string
	name      string
	text      []byte    // the call's arguments, the reasoning's summary
	parts     []msgPart // the message's content parts; the last is open
	done      bool
	summary   bool   // the reasoning item has a summary part
	encrypted string // the reasoning item's encrypted_content
}

// msgPart is a message's content part: output_text or refusal.
type msgPart struct {
	refusal bool
	text    []byte
}

// Start appends response.created and response.in_progress. Chunk and
// Finish call it when it was not called.
func (e *EventEncoder) Start(b []byte) []byte {
	if e.started {
		return b
	}
	e.started, e.open, e.think = true, -1, -1
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		status := "in_progress"
		if e.Background && typ == "response.created" {
			status = "queued"
		}
		b = e.event(b, typ)
		b = append(b, `,"response":`...)
		b = e.appendResponse(b, status, "", nil, nil)
		b = end(b)
	}
	return b
}

// Chunk appends the events for c's thinking (see thinking), text and
// tool-call deltas.
func (e *EventEncoder) Chunk(b []byte, c *chat.Chunk) []byte {
	b = e.Start(b)
	if c.Choice != 0 {
		return b
	}
	if (e.Summary || e.Encrypted) && c.Thinks() {
		b = e.thinking(b, c)
	}
	if c.Text != "" {
		b = e.textDelta(b, c.Text, false)
	}
	if c.Refusal != "" {
		b = e.textDelta(b, c.Refusal, true)
	}
	for i := range c.ToolCalls {
		b = e.toolDelta(b, &c.ToolCalls[i])
	}
	return b
}

// thinking appends the events for c's thinking. A thinking block is a
// reasoning item: with Summary, its text is the item's summary, streamed
// (reasoning_summary_part.added, reasoning_summary_text.delta, and their
// .done events when it closes); with Encrypted, a Responses upstream's
// signature (its encrypted_content) is the item's encrypted_content, in
// an item with the upstream's id (the summary's item has it when a
// Thought named it first; otherwise the encrypted content follows the
// summary's item in one of its own). A signature of any format closes
// the item, as does the answer's first
// text or call. A restart closes the open item as it stands: no event
// takes back what was sent, and the new attempt's thinking is a new
// item. Another format's signatures and redacted blocks are not written:
// only a Responses upstream could read them.
func (e *EventEncoder) thinking(b []byte, c *chat.Chunk) []byte {
	th := c.Thought
	if th != nil && th.Restart {
		b = e.closeReasoning(b)
	}
	ours := th != nil && th.Format == chat.ThinkingResponses
	if ours && th.ID != "" && e.think < 0 {
		e.name = th.ID
	}
	if c.Thinking != "" && e.Summary {
		b = e.openReasoning(b, true)
		i := e.think
		it := &e.items[i]
		it.text = append(it.text, c.Thinking...)
		b = e.event(b, "response.reasoning_summary_text.delta")
		b = e.itemRef(b, i)
		b = append(b, `,"summary_index":0,"delta":`...)
		b = openai.AppendString(b, c.Thinking)
		b = end(b)
	}
	if th == nil || th.Signature == "" {
		return b
	}
	if ours && e.Encrypted {
		if e.think >= 0 && th.ID != "" && e.items[e.think].id != th.ID {
			// The summary went out in an item of firstword's naming,
			// before the upstream's id was known; the encrypted content
			// is only good with that id (a Responses upstream looks it
			// up), so it is an item of its own, with the upstream's id.
			b = e.closeReasoning(b)
			e.name = th.ID
		}
		b = e.openReasoning(b, false)
		e.items[e.think].encrypted = th.Signature
	}
	return e.closeReasoning(b)
}

// openReasoning opens a reasoning item unless one is open, with a
// summary part if summary.
func (e *EventEncoder) openReasoning(b []byte, summary bool) []byte {
	if e.think >= 0 {
		return b
	}
	b = e.closeMessage(b)
	b = e.closeFunctions(b)
	id := e.name
	if id == "" {
		id = e.itemID("rs_")
	}
	e.name = ""
	e.think = len(e.items)
	e.items = append(e.items, outItem{reasoning: true, id: id, summary: summary})
	b = e.itemEvent(b, "response.output_item.added", e.think, "in_progress")
	if summary {
		b = e.event(b, "response.reasoning_summary_part.added")
		b = e.itemRef(b, e.think)
		b = append(b, `,"summary_index":0,"part":{"type":"summary_text","text":""}`...)
		b = end(b)
	}
	return b
}

// closeReasoning ends the open reasoning item, if any.
func (e *EventEncoder) closeReasoning(b []byte) []byte {
	if e.think < 0 {
		return b
	}
	i := e.think
	e.think = -1
	it := &e.items[i]
	if it.summary {
		b = e.event(b, "response.reasoning_summary_text.done")
		b = e.itemRef(b, i)
		b = append(b, `,"summary_index":0,"text":`...)
		b = openai.AppendString(b, string(it.text))
		b = end(b)
		b = e.event(b, "response.reasoning_summary_part.done")
		b = e.itemRef(b, i)
		b = append(b, `,"summary_index":0,"part":`...)
		b = appendSummary(b, it.text)
		b = end(b)
	}
	it.done = true
	return e.itemEvent(b, "response.output_item.done", i, "completed")
}

// textDelta appends text to the open message's output_text part, or a
// refusal to its refusal part, opening the message or the part as needed.
func (e *EventEncoder) textDelta(b []byte, text string, refusal bool) []byte {
	if e.open < 0 {
		b = e.closeReasoning(b)
		b = e.closeFunctions(b)
		e.open = len(e.items)
		e.items = append(e.items, outItem{id: e.itemID("msg_")})
		b = e.itemEvent(b, "response.output_item.added", e.open, "in_progress")
	}
	it := &e.items[e.open]
	if n := len(it.parts); n == 0 || it.parts[n-1].refusal != refusal {
		if n > 0 {
			b = e.closePart(b, e.open, n-1)
		}
		it.parts = append(it.parts, msgPart{refusal: refusal})
		b = e.event(b, "response.content_part.added")
		b = e.itemRef(b, e.open)
		b = append(b, `,"content_index":`...)
		b = strconv.AppendInt(b, int64(len(it.parts)-1), 10)
		b = append(b, `,"part":`...)
		b = appendPart(b, &msgPart{refusal: refusal})
		b = end(b)
	}
	k := len(it.parts) - 1
	p := &it.parts[k]
	p.text = append(p.text, text...)
	if refusal {
		b = e.event(b, "response.refusal.delta")
	} else {
		b = e.event(b, "response.output_text.delta")
	}
	b = e.itemRef(b, e.open)
	b = append(b, `,"content_index":`...)
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, `,"delta":`...)
	b = openai.AppendString(b, text)
	if !refusal {
		b = append(b, `,"logprobs":[]`...)
	}
	return end(b)
}

// closePart appends the .done events of part k of message item i.
func (e *EventEncoder) closePart(b []byte, i, k int) []byte {
	p := &e.items[i].parts[k]
	if p.refusal {
		b = e.event(b, "response.refusal.done")
	} else {
		b = e.event(b, "response.output_text.done")
	}
	b = e.itemRef(b, i)
	b = append(b, `,"content_index":`...)
	b = strconv.AppendInt(b, int64(k), 10)
	if p.refusal {
		b = append(b, `,"refusal":`...)
		b = openai.AppendString(b, string(p.text))
	} else {
		b = append(b, `,"text":`...)
		b = openai.AppendString(b, string(p.text))
		b = append(b, `,"logprobs":[]`...)
	}
	b = end(b)
	b = e.event(b, "response.content_part.done")
	b = e.itemRef(b, i)
	b = append(b, `,"content_index":`...)
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, `,"part":`...)
	b = appendPart(b, p)
	return end(b)
}

func (e *EventEncoder) toolDelta(b []byte, d *chat.ToolCallDelta) []byte {
	if d.Index < 0 || d.Index >= chat.MaxToolCalls {
		return b
	}
	for len(e.tools) <= d.Index {
		e.tools = append(e.tools, 0)
	}
	idx := e.tools[d.Index] - 1
	if idx < 0 {
		// One item at a time, as OpenAI streams them.
		b = e.closeReasoning(b)
		b = e.closeMessage(b)
		b = e.closeFunctions(b)
		idx = len(e.items)
		e.tools[d.Index] = idx + 1
		callID := d.ID
		if callID == "" {
			callID = e.itemID("call_")
		}
		e.items = append(e.items, outItem{function: true, id: e.itemID("fc_"), callID: callID, name: d.Name})
		b = e.itemEvent(b, "response.output_item.added", idx, "in_progress")
	}
	if d.Arguments == "" {
		return b
	}
	it := &e.items[idx]
	it.text = append(it.text, d.Arguments...)
	b = e.event(b, "response.function_call_arguments.delta")
	b = e.itemRef(b, idx)
	b = append(b, `,"delta":`...)
	b = openai.AppendString(b, d.Arguments)
	return end(b)
}

// closeMessage ends the open message item, if any.
func (e *EventEncoder) closeMessage(b []byte) []byte {
	if e.open < 0 {
		return b
	}
	i := e.open
	e.open = -1
	it := &e.items[i]
	if n := len(it.parts); n > 0 {
		b = e.closePart(b, i, n-1)
	}
	it.done = true
	return e.itemEvent(b, "response.output_item.done", i, "completed")
}

// closeFunctions ends the function-call items still open. Arguments that
// arrive later for a closed call (an upstream interleaving its calls) are
// still sent as deltas for its output_index, and the final response holds
// them whole.
func (e *EventEncoder) closeFunctions(b []byte) []byte {
	for i := range e.items {
		it := &e.items[i]
		if it.done || !it.function {
			continue
		}
		b = e.event(b, "response.function_call_arguments.done")
		b = e.itemRef(b, i)
		b = append(b, `,"name":`...)
		b = openai.AppendString(b, it.name)
		b = append(b, `,"arguments":`...)
		b = openai.AppendString(b, string(it.text))
		b = end(b)
		it.done = true
		b = e.itemEvent(b, "response.output_item.done", i, "completed")
	}
	return b
}

// Finish ends the response: every open item is closed, then
// response.completed, or response.incomplete when the answer was cut
// short by its token limit or a filter (see Status). u may be nil. An
// answer the request's deadline cut is no finish: no Responses reason
// says so, and it ends with Error (a timeout).
func (e *EventEncoder) Finish(b []byte, reason chat.FinishReason, u *chat.Usage) []byte {
	b = e.Start(b)
	b = e.closeReasoning(b)
	b = e.closeMessage(b)
	b = e.closeFunctions(b)
	status, why := Status(reason)
	b = e.event(b, "response."+status)
	b = append(b, `,"response":`...)
	b = e.appendResponse(b, status, why, u, nil)
	return end(b)
}

// Error appends response.failed, carrying the error, the output sent so
// far (its items marked incomplete) and the usage of what was sent (u may
// be nil).
func (e *EventEncoder) Error(b []byte, ce *chat.Error, u *chat.Usage) []byte {
	b = e.Start(b)
	b = e.event(b, "response.failed")
	b = append(b, `,"response":`...)
	b = e.appendResponse(b, "failed", "", u, ce)
	return end(b)
}

// Cancelled appends the end of a cancelled background response as OpenAI
// ends one: response.failed, whose response has status cancelled and no
// output (OpenAI clears it), with the usage of what was produced (u may be
// nil).
func (e *EventEncoder) Cancelled(b []byte, u *chat.Usage) []byte {
	b = e.Start(b)
	b = e.event(b, "response.failed")
	b = append(b, `,"response":`...)
	b = e.appendResponse(b, "cancelled", "", u, nil)
	return end(b)
}

// Object appends the response object as it stands, with status, no usage
// and the output items so far (none once cancelled): for a background
// request's immediate answer.
func (e *EventEncoder) Object(b []byte, status string) []byte {
	return e.appendResponse(b, status, "", nil, nil)
}

// Status is the response status for a finish reason and, for an incomplete
// one, the reason given in incomplete_details.
func Status(r chat.FinishReason) (status, reason string) {
	switch r {
	case chat.FinishLength:
		return "incomplete", "max_output_tokens"
	case chat.FinishContentFilter:
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

func (e *EventEncoder) itemID(prefix string) string {
	return prefix + strconv.Itoa(len(e.items)) + "_" + e.ID
}

// event opens an event's data object: its type and sequence number.
func (e *EventEncoder) event(b []byte, typ string) []byte {
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, int64(e.seq), 10)
	e.seq++
	return b
}

func end(b []byte) []byte { return append(b, "}\n\n"...) }

func (e *EventEncoder) itemRef(b []byte, i int) []byte {
	b = append(b, `,"item_id":`...)
	b = openai.AppendString(b, e.items[i].id)
	b = append(b, `,"output_index":`...)
	return strconv.AppendInt(b, int64(i), 10)
}

func (e *EventEncoder) itemEvent(b []byte, typ string, i int, status string) []byte {
	b = e.event(b, typ)
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"item":`...)
	b = appendItem(b, &e.items[i], status)
	return end(b)
}

func appendItem(b []byte, it *outItem, status string) []byte {
	b = append(b, `{"id":`...)
	b = openai.AppendString(b, it.id)
	if it.reasoning {
		// OpenAI's reasoning items have no status.
		b = append(b, `,"type":"reasoning"`...)
		if it.encrypted != "" {
			b = append(b, `,"encrypted_content":`...)
			b = openai.AppendString(b, it.encrypted)
		}
		b = append(b, `,"summary":[`...)
		if it.summary && status != "in_progress" {
			b = appendSummary(b, it.text)
		}
		return append(b, "]}"...)
	}
	if it.function {
		b = append(b, `,"type":"function_call","status":"`...)
		b = append(b, status...)
		b = append(b, `","call_id":`...)
		b = openai.AppendString(b, it.callID)
		b = append(b, `,"name":`...)
		b = openai.AppendString(b, it.name)
		b = append(b, `,"arguments":`...)
		b = openai.AppendString(b, string(it.text))
		return append(b, '}')
	}
	b = append(b, `,"type":"message","status":"`...)
	b = append(b, status...)
	b = append(b, `","role":"assistant","content":[`...)
	if status != "in_progress" {
		for k := range it.parts {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendPart(b, &it.parts[k])
		}
	}
	return append(b, "]}"...)
}

func appendSummary(b, text []byte) []byte {
	b = append(b, `{"type":"summary_text","text":`...)
	b = openai.AppendString(b, string(text))
	return append(b, '}')
}

func appendPart(b []byte, p *msgPart) []byte {
	if p.refusal {
		b = append(b, `{"type":"refusal","refusal":`...)
		b = openai.AppendString(b, string(p.text))
		return append(b, '}')
	}
	b = append(b, `{"type":"output_text","text":`...)
	b = openai.AppendString(b, string(p.text))
	return append(b, `,"annotations":[],"logprobs":[]}`...)
}

// appendResponse appends the response object with the output so far.
func (e *EventEncoder) appendResponse(b []byte, status, incomplete string, u *chat.Usage, ce *chat.Error) []byte {
	b = append(b, `{"id":`...)
	b = openai.AppendString(b, e.ID)
	b = append(b, `,"object":"response","created_at":`...)
	b = strconv.AppendInt(b, e.CreatedAt, 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","model":`...)
	b = openai.AppendString(b, e.Model)
	if e.Background {
		b = append(b, `,"background":true`...)
	}
	b = append(b, `,"output":[`...)
	itemStatus := "completed"
	if status == "failed" {
		itemStatus = "incomplete"
	}
	for i := range e.items {
		if status == "cancelled" {
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendItem(b, &e.items[i], itemStatus)
	}
	b = append(b, `],"error":`...)
	if ce != nil {
		eb := openai.ErrorFromChat(ce)
		b = append(b, `{"code":`...)
		b = append(b, eb.Code...)
		b = append(b, `,"message":`...)
		b = openai.AppendString(b, ce.Message)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if incomplete != "" {
		b = append(b, `{"reason":"`...)
		b = append(b, incomplete...)
		b = append(b, `"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"usage":`...)
	if u != nil {
		b = appendUsage(b, u)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}

func appendUsage(b []byte, u *chat.Usage) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.InputTokens), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CachedInputTokens), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.OutputTokens), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.ReasoningTokens), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.InputTokens+u.OutputTokens), 10)
	return append(b, '}')
}

// reasoningItem adds the reasoning item a whole thinking block is, as
// thinking writes it when streamed, if the client is to see anything of
// it.
func (e *EventEncoder) reasoningItem(tb *chat.ThinkingBlock) {
	ours := tb.Format == chat.ThinkingResponses
	it := outItem{reasoning: true, done: true, summary: e.Summary && tb.Text != ""}
	if it.summary {
		it.text = []byte(tb.Text)
	}
	if e.Encrypted && ours {
		it.encrypted = tb.Signature
	}
	if !it.summary && it.encrypted == "" {
		return
	}
	it.id = tb.ID
	if !ours || it.id == "" {
		it.id = e.itemID("rs_")
	}
	e.items = append(e.items, it)
}

// Message is an output message item: its ID and text.
type Message struct {
	ID, Text string
}

// Messages returns the message items encoded so far, with their text.
func (e *EventEncoder) Messages() []Message {
	var ms []Message
	for i := range e.items {
		it := &e.items[i]
		if it.function || it.reasoning {
			continue
		}
		var text []byte
		for _, p := range it.parts {
			text = append(text, p.text...)
		}
		if len(text) > 0 {
			ms = append(ms, Message{ID: it.id, Text: string(text)})
		}
	}
	return ms
}

// Response is a whole (non-streamed) response object for r's first
// choice, with e's ID, model and creation time.
func (e *EventEncoder) Response(r *chat.Response) []byte {
	e.open, e.think = -1, -1
	var reason chat.FinishReason
	if len(r.Choices) > 0 {
		c := &r.Choices[0]
		reason = c.FinishReason
		for i := range c.Thinking {
			e.reasoningItem(&c.Thinking[i])
		}
		if c.Text != "" || c.Refusal != "" {
			it := outItem{id: e.itemID("msg_")}
			if c.Text != "" {
				it.parts = append(it.parts, msgPart{text: []byte(c.Text)})
			}
			if c.Refusal != "" {
				it.parts = append(it.parts, msgPart{refusal: true, text: []byte(c.Refusal)})
			}
			e.items = append(e.items, it)
		}
		for _, tc := range c.ToolCalls {
			callID := tc.ID
			if callID == "" {
				callID = e.itemID("call_")
			}
			e.items = append(e.items, outItem{function: true, id: e.itemID("fc_"), callID: callID, name: tc.Name, text: []byte(tc.Arguments)})
		}
	}
	status, why := Status(reason)
	return e.appendResponse(nil, status, why, r.Usage, nil)
}
