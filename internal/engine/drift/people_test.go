package drift

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTakePeopleOnlyForTheSameDriftInTheSameState(t *testing.T) {
	alice := &Actor{User: "alice", From: "admission"}
	carol := &Actor{User: "carol", From: "admission"}
	edit := Writer{Manager: "kubectl-edit", Operation: "Update", Time: "2026-12-08T01:00:00Z"}
	field := func(path string, live any, w Writer, a *Actor) Field {
		return Field{Path: path, Live: live, Change: Changed, Writer: w, Actor: a}
	}
	sts := func(fs ...Field) Object {
		return Object{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "rag", Name: "qdrant", Status: Modified, Fields: fs}
	}
	daemon := &Report{Env: "prod", Objects: []Object{
		sts(field(".spec.replicas", 3.0, edit, alice), field(".spec.template.spec.containers[name=q].image", "q:2", edit, alice),
			field(".metadata.labels.team", "x", edit, alice), field(".spec.serviceName", "s", edit, alice)),
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "rag", Name: "gone", Status: Missing, Actor: carol},
		{APIVersion: "v1", Kind: "Secret", Namespace: "rag", Name: "keys", Status: Modified,
			Fields: []Field{field(".data.k", "hmac-a", edit, alice)}},
	}}
	later := edit
	later.Time = "2026-12-08T01:05:00Z"
	mine := &Report{Env: "prod", Objects: []Object{
		sts(field(".spec.replicas", int64(3), edit, nil), // the same drift, the value as decoded in process
			field(".spec.template.spec.containers[name=q].image", "q:3", edit, nil), // another live value
			field(".metadata.labels.team", "x", later, nil),                         // written again since
			field(".spec.serviceName", "s", edit, &Actor{User: "bob"})),             // named already
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "rag", Name: "gone", Status: Missing},
		{APIVersion: "v1", Kind: "Secret", Namespace: "rag", Name: "keys", Status: Modified,
			Fields: []Field{field(".data.k", "hmac-a", edit, nil)}},
	}}
	assert.Equal(t, 2, TakePeople(mine, daemon))
	who := func(o Object) []string {
		var out []string
		for _, f := range o.Fields {
			if f.Actor == nil {
				out = append(out, "")
			} else {
				out = append(out, f.Actor.User)
			}
		}
		return out
	}
	assert.Equal(t, []string{"alice", "", "", "bob"}, who(mine.Objects[0]))
	assert.Equal(t, carol, mine.Objects[1].Actor, "the deletion's person")
	assert.Equal(t, []string{""}, who(mine.Objects[2]), "a Secret's hashed values are not compared")
	assert.Zero(t, TakePeople(mine, nil))
}
