package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseConfig feeds the config parser arbitrary YAML: it never panics, an error names the
// file, and a config it accepts only has names that stay inside the state dir when they become
// paths (sink outboxes).
func FuzzParseConfig(f *testing.F) {
	if data, err := os.ReadFile("../../base/auditor/auditor.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("repo: x\nenvs: [prod]\nstateDir: /tmp/x\nsinks: [{name: a, slack: {urlFile: /f}}]\n"))
	f.Add([]byte("repo: x\nenvs: [prod]\nstateDir: /tmp/x\nsinks: [{name: ../../etc, slack: {urlFile: /f}}]\n"))
	f.Add([]byte("repo: x\nenvs: [prod]\nstateDir: /tmp/x\ncontrollers: [{manager: m, paths: [/spec], envs: [prod]}]\nwebhook: {insecure: true}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		c, err := parseConfig("auditor.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "auditor.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		state := "/var/lib/auditor"
		for _, s := range c.Sinks {
			p := filepath.Join(state, "outbox", s.Name)
			if rel, err := filepath.Rel(filepath.Join(state, "outbox"), p); err != nil || rel != s.Name || strings.Contains(rel, "/") {
				t.Fatalf("sink name %q escapes its outbox directory (%s)", s.Name, p)
			}
		}
	})
}
