package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/render"
)

// The shell's completion (cobra's __complete, what the completion scripts call) offers the
// repository's envs, the env's Applications and its schedule's peaks.
func TestCompletion(t *testing.T) {
	repo := filepath.Join("..", "..")
	s, err := render.FromDir(repo)
	require.NoError(t, err)
	envs, err := s.Envs()
	require.NoError(t, err)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"render", "--repo", repo, "--env", ""}, envs},
		{[]string{"promote", "--repo", repo, "--to", "st"}, []string{"staging"}},
		{[]string{"diff", "--repo", repo, "--env", "prod", "--app", "llm-"}, []string{"llm-policies", "llm-prod"}},
		{[]string{"schedule", "fire", "--repo", repo, "--env", "prod", "--peak", "week"}, []string{"weekday-morning"}},
		{[]string{"blame", "--repo", repo, "--env", "prod", "-n", "llm-inference", "deployment/vllm-q"}, []string{"deployment/vllm-qwen", "deployment/vllm-qwen-canary"}},
		{[]string{"blame", "--repo", repo, "--env", "prod", "-n", "llm-r"}, []string{"llm-rag"}},
		{[]string{"blame", "--repo", repo, "--env", "prod", "statefulset/"}, []string{"statefulset/auditor", "statefulset/qdrant"}},
		{[]string{"render", "--repo", "https://git.example.com/platform.git", "--env", ""}, nil}, // never cloned
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := runCmd(t, newRootCommand(), append([]string{"__complete"}, tc.args...)...)
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.NotEmpty(t, lines)
			assert.Equal(t, ":4", lines[len(lines)-1], "no file completion")
			assert.ElementsMatch(t, tc.want, lines[:len(lines)-1])
		})
	}
}
