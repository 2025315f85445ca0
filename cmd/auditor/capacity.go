package main

import (
	"github.com/spf13/cobra"
)

// newCapacityCommand groups the capacity calculators: KV cache, HPA decisions, cold start.
func newCapacityCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "capacity (kv|hpa|coldstart) [flags]",
		Short: "LLM inference capacity arithmetic: KV cache fit, HPA decisions, cold start",
		Long: `capacity works the numbers of docs/platform.md: how much KV cache a model needs and how many
conversations fit on a card, what replica count the HorizontalPodAutoscaler will set, and how
long a cold start takes against the startupProbe budget.

Exit codes: 0 fine, 1 a check failed (KV cache does not fit, probe budget too short), 2 bad input.`,
		Args:          groupArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SilenceUsage:  true, // as on the root: also when run on its own, e.g. in tests
		SilenceErrors: true,
	}
	// Sub-commands inherit this: malformed flag values and unknown flags are usage errors.
	flagErrorsExit2(cmd)
	cmd.AddCommand(newCapacityKVCommand(), newCapacityHPACommand(), newCapacityColdStartCommand())
	return cmd
}
