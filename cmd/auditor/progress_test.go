package main

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedWriter is a buffer the progress goroutine and the test share.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.b.String() }

func TestProgressShowsALongStepOnly(t *testing.T) {
	short := &lockedWriter{}
	stop := newProgress(short, "rendering prod", time.Hour, time.Millisecond)
	stop()
	assert.Empty(t, short.String(), "a step shorter than the delay says nothing")

	long := &lockedWriter{}
	stop = newProgress(long, "rendering prod", time.Millisecond, time.Millisecond)
	require.Eventually(t, func() bool { return strings.Count(long.String(), "rendering prod…") >= 2 }, 5*time.Second, time.Millisecond,
		"the line is rewritten while the step runs")
	stop()
	out := long.String()
	assert.True(t, strings.HasPrefix(out, "\r\033[Kauditor: rendering prod… "), out)
	assert.True(t, strings.HasSuffix(out, "auditor: rendering prod: 0s\n"), "the step's end replaces the line: %q", out)
}

// TestProgressOnATerminalOnly: a pseudo-terminal is a terminal, a pipe and a buffer are not; on
// the terminal, a step past progressAfter shows its line.
func TestProgressOnATerminalOnly(t *testing.T) {
	master, tty, err := pty.Open()
	require.NoError(t, err)
	defer master.Close()
	defer tty.Close()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	assert.True(t, isTerminal(tty))
	assert.False(t, isTerminal(w))
	assert.False(t, isTerminal(&bytes.Buffer{}))

	cmd := newRootCommand()
	cmd.SetErr(tty)
	stop := startProgress(cmd, "rendering prod")
	seen := make(chan string, 1)
	go func() {
		buf := make([]byte, 256)
		n, _ := master.Read(buf) // the first line, progressAfter in
		seen <- string(buf[:n])
	}()
	select {
	case got := <-seen:
		assert.Contains(t, got, "auditor: rendering prod… 2s")
	case <-time.After(30 * time.Second):
		t.Fatal("no progress line on the terminal")
	}
	stop()
}
