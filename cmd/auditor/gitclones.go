package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// clone is a temporary directory holding one clone, and its lock (lockClone), held for the
// process' life: a clone whose lock is free is a dead process'.
type clone struct {
	dir  string
	lock *os.File
}

// signalGrace is how long a command has to stop after its context is cancelled by a signal
// before its clones are removed under it and the process dies by the signal.
const signalGrace = 5 * time.Second

// watchSignals makes SIGINT, SIGTERM and SIGHUP cancel the command, so that main removes its
// clones once it has stopped writing to them and then dies by the signal; a command that has not
// stopped within signalGrace dies all the same, its clones removed. The caller holds g.mu.
func (g *gitFlags) watchSignals() {
	if g.onSignal || g.cancel == nil {
		return
	}
	g.onSignal = true
	var watched []os.Signal
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(s) { // nohup, or a background job of a script: ignored it stays
			watched = append(watched, s)
		}
	}
	if len(watched) == 0 {
		return
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, watched...)
	go func() {
		s := <-sig
		g.mu.Lock()
		g.got = s
		g.mu.Unlock()
		g.cancel()
		select { // a second signal does not wait for the command
		case <-sig:
		case <-time.After(signalGrace):
		}
		g.cleanup()
		dieBy(s)
	}()
}

// signalled is the signal that cancelled the command, or nil.
func (g *gitFlags) signalled() os.Signal {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.got
}

// dieBy ends the process by s with its default action, as if it had not been handled.
func dieBy(s os.Signal) {
	signal.Reset(s)
	if n, ok := s.(syscall.Signal); ok {
		_ = syscall.Kill(os.Getpid(), n)
		time.Sleep(time.Second)
		os.Exit(128 + int(n))
	}
	os.Exit(1)
}

// cleanup removes the clones this process made.
func (g *gitFlags) cleanup() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.clones {
		if err := os.RemoveAll(c.dir); err != nil {
			fmt.Fprintf(os.Stderr, "auditor: remove the clone in %s: %v\n", c.dir, err)
		}
		if c.lock != nil {
			c.lock.Close()
		}
	}
	g.clones = nil
}

// clonePrefix starts the name of a clone's temporary directory.
const clonePrefix = "auditor-clone-"

// lockName is the file in a clone's temporary directory its process holds an exclusive flock on
// for as long as it runs; the kernel releases it when the process dies, however it dies.
const lockName = "lock"

// lockClone creates dir's lock file and locks it; the file stays open (close-on-exec: render
// workers do not inherit it).
func lockClone(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the clone in %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the clone in %s: %w", dir, err)
	}
	return f, nil
}

// sweepDeadClones removes, once per process, the clones left in the temporary directory by
// auditor processes that no longer run — one killed by a signal it does not handle (SIGPIPE
// from `auditor ledger list | head`, SIGKILL, the OOM killer) cannot remove its own: those whose
// lock nobody holds. A flock is the kernel's, so this holds across PID namespaces sharing /tmp
// and whatever the dead process' pid has become. A directory without a lock file (one being
// made) is left alone. The caller holds g.mu.
func (g *gitFlags) sweepDeadClones() {
	if g.swept {
		return
	}
	g.swept = true
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), clonePrefix+"*"))
	for _, dir := range dirs {
		f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(dir) // still holding the lock: no other sweeper races this one
		}
		f.Close()
	}
}
