package metering

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/firstword/firstword/internal/store"
)

// spillFile is the usage queue's durable overflow: one JSON object per
// line, appended and fsync'd a batch at a time, replayed from the front.
// It is removed once every row in it has been written. Not safe for
// concurrent use: the UsageWriter holds fmu around every call.
type spillFile struct {
	path string
	f    *os.File // nil until the first append, and after close
	size int64    // bytes in the file
	read int64    // bytes at its front already replayed
	rows int      // lines after read
}

// spillRow is a spilled row. The names are the usage table's columns, so
// that an operator can read the file, and they must not change: a newer
// gateway replays an older one's file.
type spillRow struct {
	RequestID    string    `json:"request_id"`
	TenantID     string    `json:"tenant_id"`
	UserID       string    `json:"user_id,omitempty"`
	Time         time.Time `json:"created_at"`
	Surface      string    `json:"surface"`
	Model        string    `json:"model"`
	Deployment   string    `json:"deployment"`
	Status       string    `json:"status"`
	KeyID        string    `json:"key_id,omitempty"`
	TTFWMs       float64   `json:"ttfw_ms,omitempty"`
	InputTokens  int       `json:"input_tokens"`
	OutputTokens int       `json:"output_tokens"`
	CachedTokens int       `json:"cached_tokens"`
	Estimated    bool      `json:"estimated"`
	Cost         float64   `json:"cost"`
	TTFTMs       float64   `json:"ttft_ms"`
	TotalMs      float64   `json:"total_ms"`
	// Added with the attempts' columns (migration 0003): absent from an
	// older gateway's file, and from rows with no attempt to bill.
	AttemptsInputTokens  int     `json:"attempts_input_tokens,omitempty"`
	AttemptsOutputTokens int     `json:"attempts_output_tokens,omitempty"`
	AttemptsCost         float64 `json:"attempts_cost,omitempty"`
}

// openSpill opens the spill file at path, if there is one, and counts its
// rows. A last line without its newline is an append a crash cut short:
// it is cut off and reported as torn. With no file, it checks that the
// directory exists. An empty path is a spill file that is never used.
func openSpill(path string) (s *spillFile, torn int, err error) {
	s = &spillFile{path: path}
	if path == "" {
		return s, 0, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		// The file is made when first needed, in an outage: make sure
		// now that it can be, so that a bad path shows at start.
		// O_EXCL: the probe never truncates a file made meanwhile.
		probe, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, 0, fmt.Errorf("spill file %s: %w", path, err)
		}
		probe.Close()
		if err := os.Remove(path); err != nil {
			return nil, 0, fmt.Errorf("spill file %s: %w", path, err)
		}
		return s, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("spill file: %w", err)
	}
	var off, good int64
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		for i, b := range buf[:n] {
			if b == '\n' {
				s.rows++
				good = off + int64(i) + 1
			}
		}
		off += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("spill file: %w", err)
		}
	}
	// Cut before anything is appended: a torn line followed by good ones
	// would make the next row undecodable too.
	if good < off {
		torn = 1
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("spill file: %w", err)
		}
	}
	s.f, s.size = f, good
	if s.rows == 0 {
		// A file with no row left is removed, as after a full replay.
		return s, torn, s.reset()
	}
	return s, torn, nil
}

// append writes rows at the end of the file and fsyncs it, creating the
// file if need be. It returns how many rows it appended: none if the write
// failed (the file is cut back to where it was), else all but those that
// cannot be encoded (a NaN cost), reported in the error.
func (s *spillFile) append(rows []*store.Usage) (int, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	n, encErr := encodeRows(&buf, rows)
	if n == 0 {
		return 0, encErr
	}
	_, err := s.f.Write(buf.Bytes())
	// Synced per batch: rows in the file survive a crash of the process and
	// of the machine; the caller counts them spilled only after this.
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		// Whatever part made it would be a torn row in the middle.
		s.f.Truncate(s.size)
		return 0, fmt.Errorf("spill file: %w", err)
	}
	s.size += int64(buf.Len())
	s.rows += n
	return n, encErr
}

// encodeRows writes rows to buf as JSON lines, skipping (and reporting the
// first of) those that cannot be encoded.
func encodeRows(buf *bytes.Buffer, rows []*store.Usage) (int, error) {
	enc := json.NewEncoder(buf)
	n := 0
	var first error
	for _, u := range rows {
		err := enc.Encode(spillRow{RequestID: u.RequestID, TenantID: u.TenantID, UserID: u.UserID, Time: u.Time,
			Surface: u.Surface, Model: u.Model, Deployment: u.Deployment, Status: u.Status,
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens,
			Estimated: u.Estimated, Cost: u.Cost, TTFTMs: u.TTFTMs, TotalMs: u.TotalMs,
			AttemptsInputTokens: u.AttemptsInputTokens, AttemptsOutputTokens: u.AttemptsOutputTokens, AttemptsCost: u.AttemptsCost,
			KeyID: u.KeyID, TTFWMs: u.TTFWMs})
		if err != nil {
			if first == nil {
				first = fmt.Errorf("spill file: row %s: %w", u.RequestID, err)
			}
			continue
		}
		n++
	}
	return n, first
}

// next reads up to max lines from the front of what is not replayed. It
// returns the rows, the offset after the last line read, how many lines it
// read, and how many of them could not be decoded.
func (s *spillFile) next(max int) (rows []*store.Usage, end int64, lines, bad int, err error) {
	if err := s.open(); err != nil {
		return nil, 0, 0, 0, err
	}
	// A section from the replay offset: reading moves no shared file offset
	// (appends go to the end with O_APPEND), and stops at size, the end of
	// the last whole line.
	r := bufio.NewReader(io.NewSectionReader(s.f, s.read, s.size-s.read))
	end = s.read
	for lines < max {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break // size ends at a newline: nothing is left
		}
		if err != nil {
			return nil, 0, 0, 0, fmt.Errorf("spill file: %w", err)
		}
		end += int64(len(line))
		lines++
		var sr spillRow
		if err := json.Unmarshal(line, &sr); err != nil {
			bad++
			continue
		}
		rows = append(rows, &store.Usage{RequestID: sr.RequestID, TenantID: sr.TenantID, UserID: sr.UserID, Time: sr.Time,
			Surface: sr.Surface, Model: sr.Model, Deployment: sr.Deployment, Status: sr.Status,
			InputTokens: sr.InputTokens, OutputTokens: sr.OutputTokens, CachedTokens: sr.CachedTokens,
			Estimated: sr.Estimated, Cost: sr.Cost, TTFTMs: sr.TTFTMs, TotalMs: sr.TotalMs,
			AttemptsInputTokens: sr.AttemptsInputTokens, AttemptsOutputTokens: sr.AttemptsOutputTokens, AttemptsCost: sr.AttemptsCost,
			KeyID: sr.KeyID, TTFWMs: sr.TTFWMs})
	}
	return rows, end, lines, bad, nil
}

// consumed records that the lines up to end, lines of them, are written.
// Once all are, the file is removed: only then, so that a crash before it
// loses nothing (it replays them again instead).
func (s *spillFile) consumed(end int64, lines int) error {
	// The file is not rewritten as it is replayed: only the offset moves.
	// A crash replays it from the start again; the store ignores request
	// IDs it already has.
	s.read, s.rows = end, s.rows-lines
	if s.read >= s.size {
		return s.reset()
	}
	return nil
}

// close puts front, rows older than any in the file, ahead of its
// unreplayed rows and closes it; it returns how many of front it kept. A
// file with no rows left is removed. A partly replayed one is rewritten
// without its replayed front, so that the next start does not write those
// rows again.
func (s *spillFile) close(front []*store.Usage) (int, error) {
	switch {
	case len(front) == 0 && s.f == nil:
		return 0, nil
	case len(front) == 0 && s.rows == 0:
		return 0, s.reset()
	case len(front) == 0 && s.read == 0:
		err := s.f.Close()
		s.f = nil
		return 0, err
	}
	n, err := s.rewrite(front)
	if err != nil && n == 0 && len(front) > 0 {
		// Out of order beats lost.
		n, _ = s.append(front)
	}
	if s.f != nil {
		if cerr := s.f.Close(); err == nil {
			err = cerr
		}
		s.f = nil
	}
	return n, err
}

// rewrite replaces the file with front followed by its unreplayed rows,
// through a temporary file renamed over it.
func (s *spillFile) rewrite(front []*store.Usage) (int, error) {
	if err := s.open(); err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	n, encErr := encodeRows(&buf, front)
	tmp := s.path + ".tmp"
	err := func() error {
		out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = out.Write(buf.Bytes())
		if err == nil {
			_, err = io.Copy(out, io.NewSectionReader(s.f, s.read, s.size-s.read))
		}
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, s.path)
		}
		return err
	}()
	if err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("spill file: rewriting: %w", err)
	}
	syncDir(s.path)
	s.size, s.read, s.rows = int64(buf.Len())+s.size-s.read, 0, s.rows+n
	return n, encErr
}

// open opens the file for appending and reading, creating it.
func (s *spillFile) open() error {
	if s.f != nil {
		return nil
	}
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("spill file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("spill file: %w", err)
	}
	s.f, s.size = f, fi.Size()
	syncDir(s.path) // a new file's name must survive a crash too
	return nil
}

// reset closes and removes the file: everything in it is written.
func (s *spillFile) reset() error {
	cerr := s.f.Close()
	s.f, s.size, s.read, s.rows = nil, 0, 0, 0
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("spill file: %w", err)
	}
	syncDir(s.path)
	return cerr
}

// syncDir fsyncs the directory holding path, best effort: a file system
// that cannot is no reason to stop.
func syncDir(path string) {
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
}
