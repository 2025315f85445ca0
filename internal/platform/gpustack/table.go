// Package gpustack is the GPU stack as one triple: the NVIDIA driver of the node image (the AMI
// each GPU node class pins), the CUDA the inference image was built for, and the GPU Operator.
// The platform keeps what it knows in one file, clusters/gpu-stack.yaml: the driver each AMI
// ships, the CUDA each image digest needs, NVIDIA's minimum drivers per CUDA, and the triple
// each env states it runs. auditor check reads an env's triple from its render; Compatible says
// whether a driver runs a CUDA.
package gpustack

import (
	"fmt"
	"time"

	"sigs.k8s.io/yaml"
)

// File is where the platform keeps the table: beside the envs' ledgers, outside every path Argo
// CD syncs.
const File = "clusters/gpu-stack.yaml"

// Table is clusters/gpu-stack.yaml.
type Table struct {
	// Soak is how long staging must have run a triple healthy before prod takes it.
	Soak Duration `json:"soak"`
	// AMIs is the driver each pinned AMI ships.
	AMIs []AMI `json:"amis"`
	// Images is the CUDA each pinned inference image (by digest) was built for.
	Images []Image `json:"images"`
	// CUDA is NVIDIA's minimum Linux driver per CUDA release.
	CUDA CUDATable `json:"cuda"`
	// Envs is the triple each env states it runs: its render must pin exactly these parts.
	Envs map[string]Stated `json:"envs"`
}

// AMI is one node image and the NVIDIA driver it ships.
type AMI struct {
	// Alias is the AMI selector (al2023@v20260714) or an AMI id.
	Alias   string `json:"alias"`
	Driver  string `json:"driver"`
	Toolkit string `json:"toolkit,omitempty"`
	Source  string `json:"source"`
}

// Image is one inference image, by digest, and the CUDA it was built for.
type Image struct {
	Image  string `json:"image"`
	Digest string `json:"digest"`
	CUDA   string `json:"cuda"`
	Source string `json:"source"`
}

// CUDATable is NVIDIA's CUDA minimum driver table (Linux): a driver at or above a minor's full
// minimum runs that toolkit fully; one at or above its major's minor-version compatibility
// minimum runs it too, without features that need the newer driver (PTX JIT among them).
type CUDATable struct {
	Source string `json:"source"`
	// MinorCompatibility is the minimum driver per major (12, 13).
	MinorCompatibility map[string]string `json:"minorCompatibility"`
	// Full is the minimum driver per minor (12.9, 13.0).
	Full map[string]string `json:"full"`
}

// Stated is the triple an env states in Git.
type Stated struct {
	AMI         string `json:"ami"`
	Image       string `json:"image"` // the digest
	GPUOperator string `json:"gpuOperator"`
}

// Duration is a time.Duration written as Go writes it (24h).
type Duration struct{ time.Duration }

// UnmarshalJSON reads "24h".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes "24h0m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// Parse reads the table and checks every row: a source for each, versions that parse, an image
// row per digest, a CUDA minimum for each image's CUDA.
func Parse(data []byte) (*Table, error) {
	var t Table
	if err := yaml.UnmarshalStrict(data, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	if err := t.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", File, err)
	}
	return &t, nil
}

func (t *Table) validate() error {
	for _, a := range t.AMIs {
		if a.Alias == "" || a.Source == "" {
			return fmt.Errorf("amis: %q: alias and source are required", a.Alias)
		}
		if _, err := parseVersion(a.Driver); err != nil {
			return fmt.Errorf("amis: %s: driver: %w", a.Alias, err)
		}
	}
	for _, i := range t.Images {
		if i.Digest == "" || i.Source == "" {
			return fmt.Errorf("images: %s: digest and source are required", i.Image)
		}
		if _, err := parseVersion(i.CUDA); err != nil {
			return fmt.Errorf("images: %s: cuda: %w", i.Digest, err)
		}
	}
	if t.CUDA.Source == "" {
		return fmt.Errorf("cuda: source is required")
	}
	for _, m := range []map[string]string{t.CUDA.MinorCompatibility, t.CUDA.Full} {
		for k, v := range m {
			if _, err := parseVersion(v); err != nil {
				return fmt.Errorf("cuda: %s: %w", k, err)
			}
		}
	}
	return nil
}

// Driver is the driver an AMI ships; false when the table does not know the AMI.
func (t *Table) Driver(ami string) (AMI, bool) {
	for _, a := range t.AMIs {
		if a.Alias == ami {
			return a, true
		}
	}
	return AMI{}, false
}

// CUDAOf is the CUDA an image digest was built for; false when the table does not know it.
func (t *Table) CUDAOf(digest string) (Image, bool) {
	for _, i := range t.Images {
		if i.Digest == digest {
			return i, true
		}
	}
	return Image{}, false
}
