package budget

import "github.com/firstword/firstword/internal/jsonenc"

// MarshalJSON encodes t exactly as encoding/json would, without its
// reflection: Timings go into every request's log line.
func (t Timings) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 64+96*len(t.Stages))
	b = appendHead(b, t.TTFWMs, t.TTFThoughtMs, t.ThinkingMs, t.TTCMs)
	if t.Stages == nil {
		return append(b, "null}"...), nil
	}
	b = append(b, '[')
	for i, s := range t.Stages {
		b = appendStage(b, i, s.Name, s.StartMs, s.EndMs, s.Note, s.Group)
	}
	return append(b, "]}"...), nil
}

// AppendJSON appends the JSON of r.Timings() to b, without building it:
// the request log writes it for every request.
func (r *Recorder) AppendJSON(b []byte) []byte {
	stages := r.Stages()
	r.mu.Lock()
	ttfw, ttfthought, thinking, ttc := r.ttfw, r.ttfthought, r.thinking, r.ttc
	r.mu.Unlock()
	b = appendHead(b, ms(ttfw), ms(ttfthought), ms(thinking), ms(ttc))
	b = append(b, '[')
	for i, s := range stages {
		b = appendStage(b, i, s.Name, ms(s.Start), ms(s.End), s.Note, s.Group)
	}
	return append(b, "]}"...)
}

func appendHead(b []byte, ttfw, ttfthought, thinking, ttc float64) []byte {
	b = append(b, `{"ttfw_ms":`...)
	b = jsonenc.AppendFloat(b, ttfw)
	// As omitempty leaves them out.
	if ttfthought != 0 {
		b = append(b, `,"ttfthought_ms":`...)
		b = jsonenc.AppendFloat(b, ttfthought)
	}
	if thinking != 0 {
		b = append(b, `,"thinking_ms":`...)
		b = jsonenc.AppendFloat(b, thinking)
	}
	b = append(b, `,"ttc_ms":`...)
	b = jsonenc.AppendFloat(b, ttc)
	return append(b, `,"stages":`...)
}

// appendStage appends the i-th stage of a list.
func appendStage(b []byte, i int, name string, start, end float64, note string, group bool) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, `{"name":`...)
	b = jsonenc.AppendString(b, name)
	b = append(b, `,"start_ms":`...)
	b = jsonenc.AppendFloat(b, start)
	b = append(b, `,"end_ms":`...)
	b = jsonenc.AppendFloat(b, end)
	if note != "" {
		b = append(b, `,"note":`...)
		b = jsonenc.AppendString(b, note)
	}
	if group {
		b = append(b, `,"group":true`...)
	}
	return append(b, '}')
}
