package budget

import "github.com/firstword/firstword/internal/jsonenc"

// MarshalJSON encodes t exactly as encoding/json would, without its
// reflection: Timings go into every request's log line.
func (t Timings) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 64+96*len(t.Stages))
	b = append(b, `{"ttfw_ms":`...)
	b = jsonenc.AppendFloat(b, t.TTFWMs)
	b = append(b, `,"ttc_ms":`...)
	b = jsonenc.AppendFloat(b, t.TTCMs)
	b = append(b, `,"stages":`...)
	if t.Stages == nil {
		return append(b, "null}"...), nil
	}
	b = append(b, '[')
	for i, s := range t.Stages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = jsonenc.AppendString(b, s.Name)
		b = append(b, `,"start_ms":`...)
		b = jsonenc.AppendFloat(b, s.StartMs)
		b = append(b, `,"end_ms":`...)
		b = jsonenc.AppendFloat(b, s.EndMs)
		if s.Note != "" {
			b = append(b, `,"note":`...)
			b = jsonenc.AppendString(b, s.Note)
		}
		if s.Group {
			b = append(b, `,"group":true`...)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}
