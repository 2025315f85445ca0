package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// runCapacity runs `auditor capacity ARGS...` in-process and returns stdout and the error.
func runCapacity(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runCmd(t, newCapacityCommand(), args...)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return -1
}

func TestCapacityCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		contains []string
	}{
		{
			name: "kv seed",
			args: []string{"kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--dtype", "fp16", "--context", "8000", "--free-memory", "10GiB"},
			contains: []string{"131072 B (128 KiB)", "1048576000 B (0.98 GiB) for 8000 tokens",
				"10737418240 B (10 GiB)", "conversations that fit: 10"},
		},
		{
			name:     "kv where no conversation fits is a finding",
			args:     []string{"kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--context", "8000", "--free-memory", "512Mi"},
			code:     1,
			contains: []string{"conversations that fit: 0"},
		},
		{
			name:     "kv without free memory",
			args:     []string{"kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--context", "8000"},
			contains: []string{"131072"},
		},
		{
			name: "kv vllm check of base/vllm/llama.yaml fails the worst case",
			args: []string{"kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--context", "16384",
				"--gpu-memory", "48305799168", "--weights-size", "16060522496", "--max-num-seqs", "64"},
			code:     1,
			contains: []string{"DOES NOT FIT", "conversations that fit: 11", "Lower --max-num-seqs to 11", "3 GiB of activation/graph overhead (estimate)"},
		},
		{
			name: "kv vllm check that fits",
			args: []string{"kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--context", "8192",
				"--gpu-memory", "48305799168", "--weights-size", "16060522496", "--max-num-seqs", "16"},
			contains: []string{"vllm worst case:        fits", "conversations that fit: 22", "leaves 22.53 GiB for the KV cache"},
		},
		{
			name: "hpa seed",
			args: []string{"hpa", "--current", "4", "--metric", "30", "--target", "10"},
			contains: []string{"desired replicas: 12 (current 4)", "ceil(4 × 30 / 10)", "tolerance 10 %",
				"scale-down 300 s", "scale-up none", "8 first"},
		},
		{
			name:     "hpa clamped",
			args:     []string{"hpa", "--current", "4", "--metric", "30", "--target", "10", "--min", "2", "--max", "6"},
			contains: []string{"desired replicas: 6", "clamped down to maxReplicas 6", "[2, 6]"},
		},
		{
			name:     "hpa scale-down held by a recent recommendation",
			args:     []string{"hpa", "--current", "12", "--metric", "2", "--target", "10", "--recent", "2m=8"},
			contains: []string{"desired replicas: 8", "highest recommendation within the window is 8"},
		},
		{
			name: "coldstart as in the brief",
			args: []string{"coldstart", "--node-provisioning", "90s", "--image-size", "10GB", "--pull-bandwidth", "1Gbit/s",
				"--weights-size", "16GB", "--download-bandwidth", "1Gbit/s", "--load-bandwidth", "2GB/s", "--engine-init", "30s",
				"--startup-probe-budget", "420s"},
			contains: []string{"1. node provisioning    90 s", "2. image pull           80 s", "3. weights download    128 s",
				"4. load into GPU        38 s", "total                  336 s  5m36s", "covers the whole cold start of 336 s (84 s to spare)"},
		},
		{
			name:     "coldstart defaults are the reference and the probe flags compute 420 s",
			args:     []string{"coldstart", "--probe-initial-delay", "60s", "--probe-period", "10s", "--probe-failure-threshold", "36"},
			contains: []string{"336 s", "startup probe budget 420 s covers"},
		},
		{
			name:     "coldstart probe too short",
			args:     []string{"coldstart", "--startup-probe-budget", "60s"},
			code:     1,
			contains: []string{"raise failureThreshold"},
		},
		{
			name:     "coldstart declared load time",
			args:     []string{"coldstart", "--load-time", "45s"},
			contains: []string{"declared 45 s, + 30 s engine init", "373 s"},
		},
		{name: "bad dtype", args: []string{"kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--context", "1", "--dtype", "q4"}, code: 2},
		{name: "missing layers", args: []string{"kv", "--kv-heads", "8", "--head-dim", "128", "--context", "1"}, code: 2},
		{name: "bad size", args: []string{"kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--context", "1", "--free-memory", "lots"}, code: 2},
		{name: "free memory and vllm", args: []string{"kv", "--layers", "1", "--kv-heads", "1", "--head-dim", "1", "--context", "1", "--free-memory", "1Gi", "--gpu-memory", "2Gi"}, code: 2},
		{name: "non-numeric flag", args: []string{"kv", "--layers", "many"}, code: 2},
		{name: "unknown flag", args: []string{"hpa", "--frobnicate"}, code: 2},
		{name: "hpa missing target", args: []string{"hpa", "--current", "4", "--metric", "30"}, code: 2},
		{name: "hpa zero current", args: []string{"hpa", "--current", "0", "--metric", "30", "--target", "10"}, code: 2},
		{name: "hpa bad recent", args: []string{"hpa", "--current", "4", "--metric", "30", "--target", "10", "--recent", "yesterday"}, code: 2},
		{name: "bad bandwidth", args: []string{"coldstart", "--pull-bandwidth", "fast"}, code: 2},
		{name: "load time and bandwidth", args: []string{"coldstart", "--load-time", "10s", "--load-bandwidth", "1GB/s"}, code: 2},
		{name: "bad output", args: []string{"hpa", "--current", "4", "--metric", "30", "--target", "10", "-o", "bogus"}, code: 2},
		{name: "unknown calculator", args: []string{"gpu"}, code: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCapacity(t, tt.args...)
			if got := exitCode(err); got != tt.code {
				t.Fatalf("exit code %d (err %v), want %d\n%s", got, err, tt.code, out)
			}
			for _, s := range tt.contains {
				if !strings.Contains(out, s) {
					t.Errorf("output does not contain %q:\n%s", s, out)
				}
			}
		})
	}
}

func TestCapacityCommandJSON(t *testing.T) {
	out, err := runCapacity(t, "kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--context", "8000", "--free-memory", "10GiB", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var kv struct {
		BytesPerToken        int64 `json:"bytesPerToken"`
		ConversationBytes    int64 `json:"conversationBytes"`
		ConversationsThatFit int64 `json:"conversationsThatFit"`
	}
	if err := json.Unmarshal([]byte(out), &kv); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if kv.BytesPerToken != 131072 || kv.ConversationBytes != 1048576000 || kv.ConversationsThatFit != 10 {
		t.Errorf("kv json = %+v", kv)
	}

	out, err = runCapacity(t, "hpa", "--current", "4", "--metric", "30", "--target", "10", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var hpa struct {
		Desired                int32   `json:"desired"`
		Tolerance              float64 `json:"tolerance"`
		ScaleDownWindowSeconds float64 `json:"scaleDownWindowSeconds"`
		ScaleUpWindowSeconds   float64 `json:"scaleUpWindowSeconds"`
	}
	if err := json.Unmarshal([]byte(out), &hpa); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if hpa.Desired != 12 || hpa.Tolerance != 0.1 || hpa.ScaleDownWindowSeconds != 300 || hpa.ScaleUpWindowSeconds != 0 {
		t.Errorf("hpa json = %+v", hpa)
	}

	out, err = runCapacity(t, "coldstart", "--startup-probe-budget", "420s", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var cs struct {
		Stages []struct {
			Name    string  `json:"name"`
			Seconds float64 `json:"seconds"`
		} `json:"stages"`
		TotalSeconds       float64 `json:"totalSeconds"`
		InContainerSeconds float64 `json:"inContainerSeconds"`
		StartupProbe       struct {
			BudgetSeconds     float64 `json:"budgetSeconds"`
			CoversInContainer bool    `json:"coversInContainer"`
			CoversTotal       bool    `json:"coversTotal"`
		} `json:"startupProbe"`
	}
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(cs.Stages) != 4 || cs.TotalSeconds != 336 || cs.InContainerSeconds != 166 ||
		cs.StartupProbe.BudgetSeconds != 420 || !cs.StartupProbe.CoversTotal || !cs.StartupProbe.CoversInContainer {
		t.Errorf("coldstart json = %+v", cs)
	}
}
