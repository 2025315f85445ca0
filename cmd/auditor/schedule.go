package main

import (
	"github.com/spf13/cobra"
)

// newScheduleCommand groups the scheduled pre-peak scale-ups: plan and fire.
func newScheduleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule (plan|fire) [flags]",
		Short: "Scheduled pre-peak scale-ups written as Git commits (clusters/<env>/schedule.yaml)",
		Long: `schedule reads clusters/<env>/schedule.yaml: known traffic peaks, each raising a KEDA
ScaledObject's minReplicaCount (or an HPA's minReplicas) in the overlay ahead of the peak by the
lead time (Argo CD sync delay + cold start + margin), and reverting it when the peak is over.

Exit codes: 0 fine, 1 the firing missed its deadline, 2 bad input (a malformed schedule is
reported as file:line).`,
		Args:          groupArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flagErrorsExit2(cmd)
	cmd.AddCommand(newSchedulePlanCommand(), newScheduleFireCommand())
	return cmd
}
