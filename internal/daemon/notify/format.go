package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llm-gitops/platform/internal/daemon/message"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// FormatValue renders a field value compactly (JSON, at most 200 characters).
func FormatValue(v any) string {
	if v == nil {
		return "(none)"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	s := fmt.Sprint(v)
	if err := enc.Encode(v); err == nil {
		s = strings.TrimSuffix(buf.String(), "\n")
	}
	return message.Truncate(s, 200)
}

// fieldWriterText is writerText for a drifted field; an unknown remover is explained, since a
// removal leaves no managedFields entry to name.
func fieldWriterText(f drift.Field) string {
	if a := f.Actor; a != nil {
		user := a.Person()
		if f.Manager == "" {
			from := "the audit log"
			switch a.From {
			case "admission":
				from = "the admission webhook"
			case "":
			default:
				from = "the " + a.From
			}
			return user + " (" + a.Verb + " at " + a.Time + ", from " + from + ")"
		}
		if f.Borrowed != "" {
			return user + " with " + writerText(f.Writer) + ", under " + f.Borrowed + "'s name: not that controller" + a.NamedBy()
		}
		return user + " with " + writerText(f.Writer) + a.NamedBy()
	}
	if f.Manager == "" && f.Change == drift.Removed {
		return "unknown (a removal leaves no managedFields entry and no watched update named its writer)"
	}
	return writerText(f.Writer)
}

// writerText renders who wrote a field: manager (operation, subresource) at time.
func writerText(w drift.Writer) string {
	if w.Manager == "" {
		return "unknown manager"
	}
	s := w.Manager
	var how []string
	if w.Operation != "" {
		how = append(how, w.Operation)
	}
	if w.Subresource != "" {
		how = append(how, "subresource "+w.Subresource)
	}
	if len(how) > 0 {
		s += " (" + strings.Join(how, ", ") + ")"
	}
	if w.Time != "" {
		s += " at " + w.Time
	}
	return s
}

// group returns the API group of apiVersion ("" for the core group).
func group(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

// SyncCommand is the Argo CD command that syncs one resource back to Git's state.
func SyncCommand(app string, o drift.Object) string {
	res := group(o.APIVersion) + ":" + o.Kind + ":"
	if o.Namespace != "" {
		res += o.Namespace + "/"
	}
	return "argocd app sync " + shellQuote(app) + " --resource " + shellQuote(res+o.Name)
}

// ApplyCommand is the alternative to SyncCommand without Argo CD: render the env at the synced
// revision and server-side apply it as Argo CD's field manager.
func ApplyCommand(env, revision string) string {
	return "auditor render --env " + shellQuote(env) + " --revision " + shellQuote(revision) +
		" | kubectl apply --server-side --field-manager=argocd-controller --force-conflicts -f -"
}

// DeleteCommand deletes an object Git does not declare (with kubectl's context named for its
// cluster when that is not Argo CD's own).
func DeleteCommand(o drift.Object) string {
	s := "kubectl delete " + shellQuote(strings.ToLower(o.Kind))
	if o.Cluster != "" {
		s = "kubectl --context " + shellQuote(o.Cluster) + " delete " + shellQuote(strings.ToLower(o.Kind))
	}
	if o.Namespace != "" {
		s += " -n " + shellQuote(o.Namespace)
	}
	return s + " " + shellQuote(o.Name)
}

// shellQuote single-quotes s unless it only holds characters safe in a shell word.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
