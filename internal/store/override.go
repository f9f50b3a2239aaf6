package store

import (
	"context"
	"time"
)

// CopyKeyOverride gives the key toID the limits and budget override of
// the key fromID, if it has one: a rotated key keeps its predecessor's.
func CopyKeyOverride(ctx context.Context, st Store, fromID, toID string) error {
	ovs, err := st.ListLimitOverrides(ctx)
	if err != nil {
		return err
	}
	for _, o := range ovs {
		if o.Scope == ScopeKey && o.SubjectID == fromID {
			return st.PutLimitOverride(ctx, &LimitOverride{Scope: ScopeKey, SubjectID: toID, Settings: o.Settings, UpdatedAt: time.Now()})
		}
	}
	return nil
}
