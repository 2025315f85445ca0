package drift

// Person names whoever made a write: the user, and whom they acted as (kubectl --as), e.g.
// "alice (as system:serviceaccount:llm-system:deployer)".
func Person(user, impersonatedUser string) string {
	if impersonatedUser != "" {
		return user + " (as " + impersonatedUser + ")"
	}
	return user
}

// Person names the actor: the user, and whom they acted as.
func (a *Actor) Person() string { return Person(a.User, a.ImpersonatedUser) }

// NamedBy says where the person was named, for a report's text: " (named by the admission
// webhook)", " (named by the audit log)", " (named by Argo CD's record; written by
// system:serviceaccount:argocd:argocd-server)"; "" when From is not set.
func (a *Actor) NamedBy() string {
	switch a.From {
	case "":
		return ""
	case "admission":
		return " (named by the admission webhook)"
	case "Argo CD":
		return " (named by Argo CD's record; written by " + a.Via + ")"
	}
	return " (named by the " + a.From + ")"
}
