// Command auditor keeps a GitOps repository and the live clusters it describes honest: it renders
// what Git says, compares it with what runs, and reports who changed what by hand.
package main

import (
	"os"

	"github.com/llm-gitops/platform/internal/render"
)

func main() {
	render.ServeWorkerIfChild() // `auditor serve` renders in a child process of this binary
	err := newRootCommand().Execute()
	gitOpts.cleanup()
	stopProfile()
	os.Exit(exitStatus(os.Stderr, err))
}
