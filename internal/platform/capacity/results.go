package capacity

// KVResult is the KV cache arithmetic of one model and context length, as `auditor capacity kv`
// prints it: per token, per conversation and, given free memory, how many conversations fit.
type KVResult struct {
	Model                Model  `json:"model"`
	BytesPerToken        int64  `json:"bytesPerToken"`
	ContextTokens        int64  `json:"contextTokens"`
	ConversationBytes    int64  `json:"conversationBytes"`
	FreeMemoryBytes      *int64 `json:"freeMemoryBytes,omitempty"`
	ConversationsThatFit *int64 `json:"conversationsThatFit,omitempty"`
	// VLLM is the verdict on a vLLM configuration, after the weights and the overhead estimate
	// (DefaultOverhead): the count auditor check reports and gates on.
	VLLM *VLLMFit `json:"vllm,omitempty"`
}

// HPAResult is an HPA decision with the rules it was taken under.
type HPAResult struct {
	HPADecision
	MinReplicas            int32   `json:"minReplicas"`
	MaxReplicas            int32   `json:"maxReplicas,omitempty"`
	Tolerance              float64 `json:"tolerance"`
	ScaleDownWindowSeconds float64 `json:"scaleDownWindowSeconds"`
	ScaleUpWindowSeconds   float64 `json:"scaleUpWindowSeconds"`
}

// NewHPAResult is decision d of h.
func NewHPAResult(h HPA, d HPADecision) HPAResult {
	return HPAResult{
		HPADecision: d, MinReplicas: h.MinReplicas, MaxReplicas: h.MaxReplicas,
		Tolerance: h.Tolerance, ScaleDownWindowSeconds: h.ScaleDownWindow.Seconds(),
		ScaleUpWindowSeconds: h.ScaleUpWindow.Seconds(),
	}
}

// StageReport is one cold start stage in seconds.
type StageReport struct {
	Name        string  `json:"name"`
	Seconds     float64 `json:"seconds"`
	Detail      string  `json:"detail"`
	InContainer bool    `json:"inContainer"`
}

// ProbeReport is a startupProbe check in seconds.
type ProbeReport struct {
	BudgetSeconds     float64 `json:"budgetSeconds"`
	CoversInContainer bool    `json:"coversInContainer"`
	CoversTotal       bool    `json:"coversTotal"`
	Explanation       string  `json:"explanation"`
}

// ColdStartReport is a cold start estimate and, when a budget was given, its startupProbe check,
// in seconds: the JSON of `auditor capacity coldstart`.
type ColdStartReport struct {
	Stages             []StageReport `json:"stages"`
	TotalSeconds       float64       `json:"totalSeconds"`
	InContainerSeconds float64       `json:"inContainerSeconds"`
	StartupProbe       *ProbeReport  `json:"startupProbe,omitempty"`
}

// NewColdStartReport reports e and, when not nil, probe.
func NewColdStartReport(e ColdStartEstimate, probe *ProbeCheck) ColdStartReport {
	out := ColdStartReport{TotalSeconds: e.Total.Seconds(), InContainerSeconds: e.InContainer.Seconds()}
	for _, s := range e.Stages {
		out.Stages = append(out.Stages, StageReport{Name: s.Name, Seconds: s.Duration.Seconds(), Detail: s.Detail, InContainer: s.InContainer})
	}
	if probe != nil {
		out.StartupProbe = &ProbeReport{BudgetSeconds: probe.Budget.Seconds(), CoversInContainer: probe.CoversInContainer,
			CoversTotal: probe.CoversTotal, Explanation: probe.Explanation}
	}
	return out
}

// KVInput asks for the KV cache arithmetic of `auditor capacity kv`: the model and tokens per
// conversation, and either the free memory (FreeMemoryBytes) or a vLLM configuration (VLLM,
// whose MaxModelLen is ContextTokens).
type KVInput struct {
	Model           Model
	ContextTokens   int64
	FreeMemoryBytes *int64
	VLLM            *VLLMConfig
	// MaxNumBatchedTokens sizes the vLLM check's overhead (0: vLLM's default for the card).
	MaxNumBatchedTokens int64
}

// KV works the KV cache of in: bytes per token and per conversation, and how many conversations
// fit in the free memory, or the vLLM configuration's worst case.
func KV(in KVInput) (KVResult, error) {
	res := KVResult{Model: in.Model, ContextTokens: in.ContextTokens}
	var err error
	if res.BytesPerToken, err = BytesPerToken(in.Model); err != nil {
		return res, err
	}
	if res.ConversationBytes, err = ConversationBytes(in.Model, in.ContextTokens); err != nil {
		return res, err
	}
	switch {
	case in.VLLM != nil:
		c := *in.VLLM
		c.Model, c.MaxModelLen = in.Model, in.ContextTokens
		if c.OverheadBytes == 0 {
			sc := SeqsConfig{VLLM: c, MaxNumBatchedTokens: in.MaxNumBatchedTokens, Overhead: DefaultOverhead()}
			if c, err = sc.WithOverhead(); err != nil {
				return res, err
			}
		}
		fit, err := CheckVLLM(c)
		if err != nil {
			return res, err
		}
		res.VLLM = &fit
		free := fit.KVAvailableBytes
		res.FreeMemoryBytes = &free
	case in.FreeMemoryBytes != nil:
		free := *in.FreeMemoryBytes
		res.FreeMemoryBytes = &free
	}
	if res.FreeMemoryBytes != nil {
		n, err := ConversationsThatFit(in.Model, in.ContextTokens, *res.FreeMemoryBytes)
		if err != nil {
			return res, err
		}
		res.ConversationsThatFit = &n
	}
	return res, nil
}
