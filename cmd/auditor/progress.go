package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// progressAfter is how long a step runs before the CLI says on stderr what it is doing.
const progressAfter = 2 * time.Second

// progress shows, on a terminal, what a long step is doing and for how long: nothing for a step
// shorter than after, then one line rewritten every second, cleared when the step ends. Nothing
// is written when stderr is not a terminal (CI logs, pipes), so output stays machine-readable.
type progress struct {
	w     io.Writer
	what  string
	start time.Time
	stop  chan struct{}
	done  sync.WaitGroup
	shown bool
}

// startProgress starts a progress line on cmd's stderr for what; call the result when the step
// ends, before writing the step's output (calling it again does nothing). A nil cmd shows none.
func startProgress(cmd *cobra.Command, what string) func() {
	if cmd == nil {
		return func() {}
	}
	w := cmd.ErrOrStderr()
	if !isTerminal(w) {
		return func() {}
	}
	return newProgress(w, what, progressAfter, time.Second)
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgress writes what's progress to w: first after the given delay, then every tick.
func newProgress(w io.Writer, what string, after, tick time.Duration) func() {
	p := &progress{w: w, what: what, start: time.Now(), stop: make(chan struct{})}
	p.done.Add(1)
	go p.run(after, tick)
	var once sync.Once
	return func() {
		once.Do(func() {
			close(p.stop)
			p.done.Wait()
		})
	}
}

func (p *progress) run(after, tick time.Duration) {
	defer p.done.Done()
	timer := time.NewTimer(after)
	defer timer.Stop()
	for {
		select {
		case <-p.stop:
			if p.shown {
				fmt.Fprintf(p.w, "\r\033[Kauditor: %s: %s\n", p.what, elapsed(time.Since(p.start)))
			}
			return
		case <-timer.C:
			p.shown = true
			fmt.Fprintf(p.w, "\r\033[Kauditor: %s… %s", p.what, elapsed(time.Since(p.start)))
			timer.Reset(tick)
		}
	}
}

func elapsed(d time.Duration) string { return d.Round(time.Second).String() }
