package argocd

import "strings"

// HandEditDisables says what a hand edit of an Application's field turns off, for people: the
// field's path as the drift report spells it and the live value the edit left. "" when the
// field turns nothing off.
func HandEditDisables(path string, live any) string {
	off := live == nil || live == false
	switch {
	case path == ".spec.syncPolicy" && off, path == ".spec.syncPolicy.automated" && off:
		return "automated sync: Git's commits no longer reach the cluster until someone syncs by hand"
	case path == ".spec.syncPolicy.automated.selfHeal" && off:
		return "self-heal: Argo CD no longer reverts hand edits of the Application's objects"
	case path == ".spec.syncPolicy.automated.prune" && off:
		return "prune: objects deleted from Git stay in the cluster"
	case path == ".spec.syncPolicy.automated.enabled" && off:
		return "automated sync: Git's commits no longer reach the cluster until someone syncs by hand"
	case strings.HasSuffix(path, ".targetRevision"):
		return "following Git's revision: the Application syncs the revision the edit names, not the one Git declares"
	case strings.HasPrefix(path, ".spec.ignoreDifferences"):
		return "part of Argo CD's comparison: the fields it now ignores can drift without Argo CD saying so"
	}
	return ""
}
