// Command auditor keeps a GitOps repository and the live clusters it describes honest: it renders
// what Git says, compares it with what runs, and reports who changed what by hand.
package main

import (
	"context"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/llm-gitops/platform/internal/engine/render"
)

func main() {
	render.ServeWorkerIfChild() // `auditor serve` renders in a child process of this binary
	// Argo CD's libraries log through logrus; their info lines narrate their own informers
	// ("Starting configmap/secret informers"), nothing a user of a command asked about.
	logrus.SetLevel(logrus.WarnLevel)
	ctx, cancel := context.WithCancel(context.Background())
	gitOpts.ctx, gitOpts.cancel = ctx, cancel // a signal cancels the command once it holds a clone (gitFlags.remote)
	err := newRootCommand().ExecuteContext(ctx)
	gitOpts.cleanup()
	stopProfile()
	code := exitStatus(os.Stderr, err) // said even when a signal ended the command: what was done, what was not
	if s := gitOpts.signalled(); s != nil {
		dieBy(s) // as the signal's default action would have: a shell script running us stops
	}
	os.Exit(code)
}
