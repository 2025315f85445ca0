package gpustack

import (
	"fmt"
	"strings"
)

// Triple is the GPU stack an env runs: the AMI of its GPU nodes and the driver it ships, the
// inference image (by digest) and the CUDA it was built for, and the GPU Operator's chart version.
type Triple struct {
	AMI         string `json:"ami"`
	Driver      string `json:"driver,omitempty"`
	Image       string `json:"image"`
	CUDA        string `json:"cuda,omitempty"`
	GPUOperator string `json:"gpuOperator,omitempty"`
}

// Same says whether two triples pin the same promoted parts: the AMI and the image (the driver
// and the CUDA follow from them). The GPU Operator is not among them: apps/ syncs it from main to
// every env at once, so no promotion carries it and no soak can hold it back.
func (t Triple) Same(o Triple) bool {
	return t.AMI == o.AMI && t.Image == o.Image
}

// Zero says whether the triple names nothing (an env without GPUs).
func (t Triple) Zero() bool { return t.AMI == "" && t.Image == "" && t.GPUOperator == "" }

// String is the triple in one line: AMI (driver), image (CUDA), GPU Operator.
func (t Triple) String() string {
	return fmt.Sprintf("AMI %s (driver %s), image %s (CUDA %s), GPU Operator %s",
		orUnknown(t.AMI), orUnknown(t.Driver), ShortDigest(t.Image), orUnknown(t.CUDA), orUnknown(t.GPUOperator))
}

// ShortDigest is an image digest cut to its first 12 hex digits (sha256:8a69ffad015f).
func ShortDigest(d string) string {
	if algo, hex, ok := strings.Cut(d, ":"); ok && len(hex) > 12 {
		return algo + ":" + hex[:12]
	}
	return orUnknown(d)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Fill sets the driver and the CUDA the table knows for the triple's AMI and image.
func (t *Table) Fill(tr Triple) Triple {
	if a, ok := t.Driver(tr.AMI); ok {
		tr.Driver = a.Driver
	}
	if i, ok := t.CUDAOf(tr.Image); ok {
		tr.CUDA = i.CUDA
	}
	return tr
}

// Digest is the digest of an image reference (repo:tag@sha256:…), "" without one.
func Digest(image string) string {
	if _, d, ok := strings.Cut(image, "@"); ok {
		return d
	}
	return ""
}
