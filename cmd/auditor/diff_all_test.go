package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

func TestOnlyApplicationTakesANameOrNamespaceSlashName(t *testing.T) {
	rep := &drift.Report{Env: "prod", Revision: "r1",
		Applications: []drift.Application{
			{Name: "llm-prod", Namespace: "argocd"},
			{Name: "team-a/api", Namespace: "team-a"},
			{Name: "team-b/api", Namespace: "team-b"},
			{Name: "team-b/rag", Namespace: "team-b"},
		},
		Objects: []drift.Object{
			{Kind: "ConfigMap", Name: "a", Application: "team-a/api", Status: drift.Modified},
			{Kind: "ConfigMap", Name: "b", Application: "team-b/api", Status: drift.Modified},
			{Kind: "ConfigMap", Name: "r", Application: "team-b/rag", Status: drift.Modified},
		}}
	for _, tc := range []struct {
		arg, want string
		objects   []string
		err       string
	}{
		{arg: "llm-prod", want: "llm-prod"},
		{arg: "argocd/llm-prod", want: "llm-prod"},
		{arg: "team-b/api", want: "team-b/api", objects: []string{"b"}},
		{arg: "rag", want: "team-b/rag", objects: []string{"r"}},
		{arg: "api", err: "env prod has 2 Applications named api: name one as namespace/name"},
		{arg: "nope", err: "env prod has no Application nope"},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			got, err := onlyApplication(rep, tc.arg)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.Len(t, got.Applications, 1)
			assert.Equal(t, tc.want, got.Applications[0].Name)
			var objs []string
			for _, o := range got.Objects {
				objs = append(objs, o.Name)
			}
			assert.Equal(t, tc.objects, objs)
		})
	}
}
