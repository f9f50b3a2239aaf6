package yardstick

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// TerminalProgress returns a progress bar with an ETA on w when w is a
// terminal, and nil (no progress shown) otherwise.
func TerminalProgress(w io.Writer) Progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &bar{w: w}
}

type bar struct {
	w io.Writer
	b *progressbar.ProgressBar
}

func (p *bar) Start(total int) {
	p.b = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription("bench"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30))
}

func (p *bar) Add(n int) { p.b.Add(n) }
func (p *bar) Finish()   { p.b.Finish() }
