package adopt

// Fixtures of the message tests (package adopt_test: they use notify, which imports adopt).
var (
	DevKust       = devKust
	Capacity      = capacity
	APIBase       = apiBase
	GitRepo       = gitRepo
	Git           = git
	ApplyPatch    = applyPatch
	AssertAdopted = assertAdopted

	AReplicas, ANoFoo, AImage, ATeam, ATolByIx = aReplicas, aNoFoo, aImage, aTeam, aTolByIx
)
