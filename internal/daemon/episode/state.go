package episode

import (
	"encoding/json"
	"fmt"
	"slices"
)

// state is a Book's JSON form.
type state struct {
	Version int       `json:"version"`
	Seq     uint64    `json:"seq"`
	Open    []Episode `json:"open"`
	Ended   []Episode `json:"ended"`
}

// MarshalJSON encodes the open and kept ended episodes.
func (b *Book) MarshalJSON() ([]byte, error) {
	open := b.Open("")
	b.mu.Lock()
	st := state{Version: 1, Seq: b.seq, Open: open, Ended: slices.Clone(b.ended)}
	b.mu.Unlock()
	data, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("episode: encode: %w", err)
	}
	return data, nil
}

// UnmarshalJSON replaces the Book's episodes by those MarshalJSON encoded; retention settings
// stay.
func (b *Book) UnmarshalJSON(data []byte) error {
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("episode: decode: %w", err)
	}
	if st.Version != 1 {
		return fmt.Errorf("episode: state version %d not supported", st.Version)
	}
	open := map[string]*Episode{}
	for i := range st.Open {
		e := st.Open[i]
		open[e.identity()] = &e
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open, b.ended, b.seq = open, st.Ended, st.Seq
	if b.keep <= 0 {
		b.keep, b.maxAge = DefaultKeep, DefaultMaxAge
	}
	return nil
}
