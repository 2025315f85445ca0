package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/version"
)

// newRootCommand is `auditor` with every command.
func newRootCommand() *cobra.Command {
	var profile, profileOutput string
	root := &cobra.Command{
		Use:           "auditor",
		Short:         "Audit live Kubernetes objects against the GitOps repository",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().String(), // --version, as `auditor version`
		PersistentPreRunE: func(*cobra.Command, []string) error {
			stop, err := startProfile(profile, profileOutput)
			if err != nil {
				return err // stopProfile stays a no-op: main calls it whatever happened
			}
			stopProfile = stop
			return nil
		},
	}
	// As kubectl's: where a slow command spends its time.
	root.PersistentFlags().StringVar(&profile, "profile", "none", "profile to capture: none, cpu or heap")
	root.PersistentFlags().StringVar(&profileOutput, "profile-output", "profile.pprof", "file to write the profile to")
	root.SetVersionTemplate("{{.Version}}\n")
	addRootGitFlags(root)
	root.AddCommand(newVersionCommand(), newRenderCommand(), newDiffCommand(), newBlameCommand(), newCapacityCommand(), newServeCommand(), newCheckCommand(), newSimulateCommand(), newProfileCommand(), newLedgerCommand(), newRollbackCommand(), newScheduleCommand(), newPromoteCommand(), newSiteCommand(), newDoctorCommand(), newMCPCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the module version, Git commit and Go version",
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			return writeReport(cmd.OutOrStdout(), output, info, func() error {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), info.String())
				return err
			})
		},
	}
	addReportOutput(cmd, &output)
	return cmd
}

// stopProfile writes the running profile out; main calls it whatever the command returned.
var stopProfile = func() {}

// startProfile starts the profile asked for and returns what writes it out.
func startProfile(kind, output string) (func(), error) {
	switch kind {
	case "", "none":
		return func() {}, nil
	case "cpu":
		f, err := os.Create(output)
		if err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("profile: %w", err)
		}
		return func() { pprof.StopCPUProfile(); f.Close() }, nil
	case "heap":
		return func() {
			f, err := os.Create(output)
			if err != nil {
				fmt.Fprintln(os.Stderr, "profile:", err)
				return
			}
			defer f.Close()
			runtime.GC()
			if err := pprof.WriteHeapProfile(f); err != nil {
				fmt.Fprintln(os.Stderr, "profile:", err)
			}
		}, nil
	}
	return nil, usageErr("unknown profile %q (want none, cpu or heap)", kind)
}
