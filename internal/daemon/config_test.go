package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestShippedConfigLoads loads the configuration base/auditor ships, as the pod would see it.
func TestShippedConfigLoads(t *testing.T) {
	data, err := os.ReadFile("../../base/auditor/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct{ Data map[string]string }
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AUDITOR_ENV", "prod")
	cfg, err := LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Envs) != 1 || cfg.Envs[0] != "prod" || !cfg.LeaderElection.Enabled || cfg.FetchInterval.Duration.String() != "1m0s" || len(cfg.Sinks) != 1 {
		t.Errorf("unexpected config %+v", cfg)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := map[string]string{
		"repo is required":      "envs: [prod]\nstateDir: /tmp/x\n",
		"exactly one of":        "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nsinks: [{name: a}]\n",
		"unknown field":         "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nsinkz: []\n",
		"duration \"soon\"":     "repo: x\nenvs: [prod]\nstateDir: /tmp/x\nfetchInterval: soon\n",
		"stateDir is required":  "repo: x\nenvs: [prod]\n",
		"at least one environm": "repo: x\nstateDir: /tmp/x\n",
	}
	for want, doc := range cases {
		file := filepath.Join(t.TempDir(), "c.yaml")
		_ = os.WriteFile(file, []byte(doc), 0o644)
		if _, err := LoadConfig(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to mention %q", doc, err, want)
		}
	}
}
