package daemon

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	auditorOnce sync.Once
	auditorPath string
	auditorErr  error
)

// auditorBinary builds the CLI once: failover is about processes that die.
func auditorBinary(t *testing.T) string {
	t.Helper()
	auditorOnce.Do(func() {
		dir, err := os.MkdirTemp("", "auditor-failover-")
		if err != nil {
			auditorErr = err
			return
		}
		auditorPath = filepath.Join(dir, "auditor")
		if out, err := exec.Command("go", "build", "-o", auditorPath, "../../cmd/auditor").CombinedOutput(); err != nil {
			auditorErr = fmt.Errorf("build auditor: %v\n%s", err, out)
		}
	})
	require.NoError(t, auditorErr)
	return auditorPath
}

// replica is one `auditor serve` process.
type replica struct {
	id   string
	addr string
	cmd  *exec.Cmd
	log  *syncBuffer
	dead bool
}

func (r *replica) status() (Status, bool) {
	var st Status
	resp, err := http.Get("http://" + r.addr + "/api/v1/status")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&st) == nil
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// TestLeaderKilledAnnouncesEveryDriftOnce runs three `auditor serve` processes on one real
// Lease and kills the leader with SIGKILL twice: once while a drift is being folded (the fold
// window holds it, unsent), once right after a new hand edit. Every drift must reach every chat
// receiver exactly once, and nothing may be announced resolved.
func TestLeaderKilledAnnouncesEveryDriftOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three daemon processes")
	}
	bin := auditorBinary(t)
	h := newHarness(t)
	var replicas []*replica
	for _, id := range []string{"replica-a", "replica-b", "replica-c"} {
		cfg := h.config(t.TempDir())
		cfg.Listen = freeAddr(t)
		cfg.FoldWindow = Duration{3 * time.Second} // long enough to kill inside it
		cfg.LeaderElection = LeaderElectionConfig{Enabled: true, Namespace: "default", Name: h.p.Prefix + "-auditor", Identity: id,
			LeaseDuration: Duration{3 * time.Second}, RenewDeadline: Duration{2 * time.Second}, RetryPeriod: Duration{300 * time.Millisecond}}
		data, err := json.Marshal(cfg)
		require.NoError(t, err)
		file := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(file, data, 0o600))
		r := &replica{id: id, addr: cfg.Listen, log: &syncBuffer{}}
		r.cmd = exec.Command(bin, "serve", "--config", file)
		r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
		require.NoError(t, r.cmd.Start())
		t.Cleanup(func() {
			if !r.dead {
				_ = r.cmd.Process.Signal(syscall.SIGTERM)
				_ = r.cmd.Wait()
			}
		})
		replicas = append(replicas, r)
	}
	logs := func() string {
		var b strings.Builder
		for _, r := range replicas {
			fmt.Fprintf(&b, "=== %s\n%s\n", r.id, r.log.String())
		}
		return b.String()
	}
	// leader waits for the one live replica that says it leads and whose first audit is done.
	leader := func() *replica {
		t.Helper()
		var found *replica
		require.Eventually(t, func() bool {
			for _, r := range replicas {
				if st, ok := r.status(); !r.dead && ok && st.Leader && st.Ready {
					found = r
					return true
				}
			}
			return false
		}, 60*time.Second, 50*time.Millisecond, "no leader\n%s", logs())
		return found
	}
	kill := func(r *replica) {
		require.NoError(t, r.cmd.Process.Signal(syscall.SIGKILL))
		_ = r.cmd.Wait()
		r.dead = true
	}
	// seen waits until the replica's own report shows a drift (it has audited the edit).
	seen := func(r *replica, token string) {
		t.Helper()
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + r.addr + "/api/v1/drift?env=prod")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var b strings.Builder
			buf := make([]byte, 32<<10)
			for {
				n, err := resp.Body.Read(buf)
				b.Write(buf[:n])
				if err != nil {
					break
				}
			}
			return strings.Contains(b.String(), token)
		}, 30*time.Second, 10*time.Millisecond, "%s never saw %s\n%s", r.id, token, logs())
	}
	tokens := map[string]string{ // a hand edit's drift, as a message names it
		"replicas": "replicas",
		"env":      "LOG", // LOG_LEVEL, whose _ Mattermost escapes
		"label":    "labels.team",
		"note":     "annotations.note",
	}

	first := leader()
	h.p.Kubectl("-n", h.p.NS("rag"), "scale", "statefulset/qdrant", "--replicas=2")
	for _, r := range h.receivers {
		r.waitMessages(t, 1, 30*time.Second) // the leading edge: sent at once
	}
	// Inside the fold window opened by that message: a second drift is held, unsent.
	h.p.Kubectl("-n", h.p.NS("api"), "set", "env", "deployment/rag-api", "LOG_LEVEL=debug")
	seen(first, "LOG_LEVEL")
	kill(first)

	second := leader()
	require.NotEqual(t, first.id, second.id)
	// Right after a new drift: the edit is stored, the leader dies before or while it audits.
	h.p.Kubectl("-n", h.p.NS("api"), "label", "deployment/rag-api", "team=search")
	kill(second)

	third := leader()
	// A last edit, announced by the survivor: once it arrives, everything before it has too.
	h.p.Kubectl("-n", h.p.NS("api"), "annotate", "service/rag-api", "note=debugging")
	for _, r := range h.receivers {
		require.Eventually(t, func() bool {
			return strings.Contains(strings.Join(r.messages(), "\n"), tokens["note"])
		}, 60*time.Second, 50*time.Millisecond, "%s: the survivor %s never announced the last edit\n%s", r.name, third.id, logs())
	}
	for _, r := range h.receivers {
		msgs := r.messages()
		for name, token := range tokens {
			n := 0
			for _, m := range msgs {
				if strings.Contains(m, token) {
					n++
				}
			}
			assert.Equal(t, 1, n, "%s: messages naming the %s drift (%s):\n%s", r.name, name, token, strings.Join(msgs, "\n---\n"))
		}
		for _, m := range msgs {
			assert.NotContains(t, m, "Resolved", "%s: a drift announced resolved", r.name)
		}
	}
	if t.Failed() {
		t.Log(logs())
	}
}
