package sse

import (
	"bytes"
	"io"
	"strconv"
)

// Writer writes text/event-stream events. Each method issues exactly one
// Write to the underlying writer, so a caller that flushes after every call
// delivers every event on its own. Writer does not flush.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Event writes one event. typ and id are omitted when empty. data may
// contain newlines; each line becomes its own data field. typ and id must
// not contain CR or LF.
func (w *Writer) Event(typ, id string, data []byte) error {
	b := w.buf[:0]
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	if typ != "" {
		b = append(b, "event: "...)
		b = append(b, typ...)
		b = append(b, '\n')
	}
	b = AppendData(b, data)
	b = append(b, '\n')
	w.buf = b
	_, err := w.w.Write(b)
	return err
}

// AppendData appends data as one or more "data:" lines.
func AppendData(b, data []byte) []byte {
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			b = append(b, "data: "...)
			b = append(b, data...)
			return append(b, '\n')
		}
		b = append(b, "data: "...)
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// Comment writes a comment line, which clients ignore; used as a heartbeat.
func (w *Writer) Comment(text string) error {
	b := append(w.buf[:0], ':')
	if text != "" {
		b = append(b, ' ')
		b = append(b, text...)
	}
	b = append(b, "\n\n"...)
	w.buf = b
	_, err := w.w.Write(b)
	return err
}

// Retry writes the reconnection-time hint, in milliseconds.
func (w *Writer) Retry(ms int) error {
	b := append(w.buf[:0], "retry: "...)
	b = strconv.AppendInt(b, int64(ms), 10)
	b = append(b, "\n\n"...)
	w.buf = b
	_, err := w.w.Write(b)
	return err
}

// Raw writes b as is; the caller is responsible for its framing.
func (w *Writer) Raw(b []byte) error {
	_, err := w.w.Write(b)
	return err
}
