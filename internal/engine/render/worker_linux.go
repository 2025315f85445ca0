package render

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// selfPeakRSS is this process' own peak resident set size in bytes (VmHWM). A worker reports it
// in its trailer: the rusage of a finished child would not do, as Linux starts an exec'd child's
// maximum at its parent's peak (the exec replaces the memory it shared with its parent, and the
// high-water mark of that memory is kept).
func selfPeakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			if f := strings.Fields(v); len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// workerExecutable is the file this process runs: /proc/self/exe names the binary it was started
// from even when a package upgrade has since replaced the file at its path, so a worker is never
// a newer version speaking another protocol.
func workerExecutable() (string, error) {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// prepareWorker makes the worker lead a process group of its own, killed whole when the render
// is cancelled (kustomize runs git for a remote base), and makes the kernel kill the worker when
// its parent dies, SIGKILL included, so no orphan renders on for a daemon that is gone.
func prepareWorker(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// spawner is the goroutine that starts every worker, locked to its OS thread for the life of the
// process. The kernel sends a child's parent-death signal when the thread that forked it exits,
// not the process; Go ends a thread when a goroutine locked to it returns, so a worker forked by
// whichever thread the caller ran on could be killed mid-render by unrelated code's LockOSThread.
var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// startWorker starts cmd from the spawner's thread.
func startWorker(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: this goroutine never returns
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- spawnRequest{cmd, done}
	return <-done
}
