package perf

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// memCgroup is a memory cgroup the benchmark makes for the daemon, so that what a container's
// limit counts — the daemon, its render workers, and the page cache they fault in — is measured
// the way the kernel counts it for the OOM killer. nil where this process may not make one.
type memCgroup struct {
	dir string
	v2  bool
}

// newMemCgroup makes a memory cgroup under this process' own (cgroup v1's memory hierarchy, or
// v2 with the memory controller); the error says why none could be made.
func newMemCgroup(name string) (*memCgroup, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		var cg *memCgroup
		switch {
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			cg = &memCgroup{dir: filepath.Join("/sys/fs/cgroup/memory", f[2], name)}
		case f[0] == "0" && f[1] == "":
			parent := filepath.Join("/sys/fs/cgroup", f[2])
			ctl, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
			if err != nil || !slices.Contains(strings.Fields(string(ctl)), "memory") {
				continue // v2 without the memory controller for children here
			}
			cg = &memCgroup{dir: filepath.Join(parent, name), v2: true}
		default:
			continue
		}
		if err := os.Mkdir(cg.dir, 0o755); err != nil {
			return nil, err
		}
		return cg, nil
	}
	return nil, fmt.Errorf("no memory cgroup in /proc/self/cgroup")
}

// command runs bin in the cgroup from its first instruction, as a container's process starts in
// the container's: a shell writes its own pid into the cgroup, then execs bin (same pid). Memory
// is charged to the cgroup that faults it in, so the binary's file pages are first dropped from
// the page cache (clean and unmapped, they go): the daemon faults them in again, charged here, as
// a container faults in its image's.
func (c *memCgroup) command(bin string, args ...string) *exec.Cmd {
	if f, err := os.Open(bin); err == nil {
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
	return exec.Command("sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(c.dir, "cgroup.procs"), bin}, args...)...)
}

// limit sets the cgroup's memory limit in bytes (a container's limits.memory).
func (c *memCgroup) limit(bytes int64) error {
	name := "memory.limit_in_bytes"
	if c.v2 {
		name = "memory.max"
	}
	return os.WriteFile(filepath.Join(c.dir, name), []byte(strconv.FormatInt(bytes, 10)), 0o644)
}

// oomKills is how many of the cgroup's processes the kernel's OOM killer killed.
func (c *memCgroup) oomKills() float64 {
	name := "memory.oom_control"
	if c.v2 {
		name = "memory.events"
	}
	data, _ := os.ReadFile(filepath.Join(c.dir, name))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}

func (c *memCgroup) read(name string) float64 {
	data, err := os.ReadFile(filepath.Join(c.dir, name))
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	return v
}

// peak is the most memory the cgroup ever charged, in bytes (v1 max_usage_in_bytes, v2 memory.peak).
func (c *memCgroup) peak() float64 {
	if c.v2 {
		return c.read("memory.peak")
	}
	return c.read("memory.max_usage_in_bytes")
}

// workingSet is what the kubelet reports as the container's memory and evicts on: usage less
// the inactive file pages the kernel may drop.
func (c *memCgroup) workingSet() float64 {
	usage, inactive := c.read("memory.usage_in_bytes"), "total_inactive_file"
	if c.v2 {
		usage, inactive = c.read("memory.current"), "inactive_file"
	}
	data, _ := os.ReadFile(filepath.Join(c.dir, "memory.stat"))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, inactive+" "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return max(usage-n, 0)
		}
	}
	return usage
}

// remove deletes the cgroup once its processes are gone.
func (c *memCgroup) remove() {
	for range 50 {
		if os.Remove(c.dir) == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// memSample is one reading, in MiB: the daemon's RSS, its render workers' (its children: their
// RSS counts the binary's text, which the daemon's counts too, so the two do not add up), and
// the cgroup's working set (0 without a cgroup).
type memSample struct{ daemon, workers, workingSet float64 }

// sampler reads the daemon's memory every interval until stopped.
type sampler struct {
	mu      sync.Mutex
	samples []memSample
	stop    context.CancelFunc
	done    chan struct{}
}

// startSampler samples pid's memory every period until finish. onPeak, when set, is called each
// time the daemon's RSS exceeds the highest so far by 8 MiB (to take a heap profile near the peak).
func startSampler(pid int, cg *memCgroup, every time.Duration, onPeak func(rssMiB float64)) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		peak := 0.0
		for {
			m := memSample{daemon: rssMiB(pid)}
			if m.daemon > peak+8 && onPeak != nil {
				peak = m.daemon
				onPeak(peak)
			}
			for _, c := range children(pid) {
				m.workers += rssMiB(c)
			}
			if cg != nil {
				m.workingSet = cg.workingSet() / (1 << 20)
			}
			s.mu.Lock()
			s.samples = append(s.samples, m)
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops the sampler and returns its samples.
func (s *sampler) finish() []memSample {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// stat is the p-th percentile (nearest rank) of one figure over samples.
func stat(samples []memSample, p int, f func(memSample) float64) float64 {
	vs := make([]float64, 0, len(samples))
	for _, m := range samples {
		vs = append(vs, f(m))
	}
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	idx := (len(vs)*p + 99) / 100
	if idx > 0 {
		idx--
	}
	return vs[idx]
}

// rssMiB is a process' resident set size in MiB (0 once it is gone).
func rssMiB(pid int) float64 { return procStatus(pid)["VmRSS"] / 1024 }

// children are the pids of pid's child processes, from every one of its threads.
func children(pid int) []int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	var out []int
	for _, t := range tasks {
		data, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// cpuSeconds is a process' CPU time (user + system) and that of its children it has waited for,
// from /proc/<pid>/stat.
func cpuSeconds(pid int) (own, reaped float64) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	f := strings.Fields(rest) // f[0] is field 3 (state): utime is field 14, cstime 17
	if len(f) < 15 {
		return 0, 0
	}
	tick := func(i int) float64 { v, _ := strconv.ParseFloat(f[i-3], 64); return v / clockTicks }
	return tick(14) + tick(15), tick(16) + tick(17)
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux architecture Go
// supports.
const clockTicks = 100
