package durable

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/budgetd/budgetd/wal"
)

// checkpoint is how far the drainer got: every record before Acked is in the
// store; when Pending is set, the records from Acked to Pending were being
// written as one batch when the checkpoint was saved.
type checkpoint struct {
	Acked   wal.Position  `json:"acked"`
	Pending *wal.Position `json:"pending,omitempty"`
}

const checkpointFile = "checkpoint.json"

func loadCheckpoint(dir string) (checkpoint, error) {
	var cp checkpoint
	data, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return cp, nil
	}
	if err != nil {
		return cp, fmt.Errorf("read wal checkpoint: %w", err)
	}
	if err := json.Unmarshal(data, &cp); err != nil {
		return cp, fmt.Errorf("read wal checkpoint: %w", err)
	}
	return cp, nil
}

// saveCheckpoint replaces the checkpoint atomically: write a temporary file,
// fsync it, rename it over the old one, fsync the directory.
func saveCheckpoint(dir string, cp checkpoint) error {
	data, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("save wal checkpoint: %w", err)
	}
	tmp := filepath.Join(dir, checkpointFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("save wal checkpoint: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("save wal checkpoint: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save wal checkpoint: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save wal checkpoint: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, checkpointFile)); err != nil {
		return fmt.Errorf("save wal checkpoint: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("save wal checkpoint: %w", err)
	}
	defer d.Close()
	return d.Sync()
}
