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
