package check

import (
	"fmt"
	"net/url"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RunbookDir is the repository folder every alert's runbook_url must point into.
const RunbookDir = "docs/runbooks/"

// alertRunbooks checks that every alert of every PrometheusRule has a runbook_url annotation
// naming a file of docs/runbooks/ at the checked revision: an alert that pages somebody must say
// what to do, and a link to a page that was renamed or never written is no better than none.
// The URL may point at any Git web UI of this repository (https://HOST/.../blob/main/docs/runbooks/X.md);
// what counts is the path from docs/runbooks/ on, which must be a file in files.
func alertRunbooks(objs []*unstructured.Unstructured, files map[string][]byte) []Violation {
	var out []Violation
	for _, o := range objs {
		if o.GroupVersionKind().Group != "monitoring.coreos.com" || o.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(asMap(g), "rules")
			for _, r := range rules {
				rule := asMap(r)
				alert, _ := rule["alert"].(string)
				if alert == "" {
					continue // a recording rule
				}
				link, _, _ := unstructured.NestedString(rule, "annotations", "runbook_url")
				if msg := runbookProblem(link, files); msg != "" {
					out = append(out, Violation{Rule: "alert-runbook", Object: id(o),
						Message: fmt.Sprintf("%s: alert %s %s", id(o), alert, msg)})
				}
			}
		}
	}
	return out
}

// runbookProblem says what is wrong with a runbook_url ("" when it names an existing runbook).
func runbookProblem(link string, files map[string][]byte) string {
	if link == "" {
		return "has no runbook_url annotation: add one pointing at " + RunbookDir + "<alert>.md (what it means, how to check, how to mitigate)"
	}
	p, ok := RunbookPath(link)
	if !ok {
		return fmt.Sprintf("has runbook_url %q, which does not point into %s of this repository", link, RunbookDir)
	}
	if _, ok := files[p]; !ok {
		return fmt.Sprintf("has runbook_url %q but %s does not exist at this revision", link, p)
	}
	return ""
}

// RunbookPath returns the repository path a runbook_url names: from docs/runbooks/ on, without
// query or fragment. ok is false when the URL names no file below docs/runbooks/.
func RunbookPath(link string) (string, bool) {
	u, err := url.Parse(link)
	if err != nil {
		return "", false
	}
	i := strings.Index(u.Path, "/"+RunbookDir)
	if i < 0 {
		return "", false
	}
	p := path.Clean(u.Path[i+1:])
	if !strings.HasPrefix(p, RunbookDir) || p == path.Clean(RunbookDir) {
		return "", false // ../ climbed out of the folder, or the folder itself
	}
	return p, true
}
