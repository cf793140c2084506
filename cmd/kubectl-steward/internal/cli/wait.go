package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitFor follows one object until observe says it is done. It reads the object, then watches it, and reads
// it again every resync period and whenever the watch ends: a watch may close at any time (the API server
// ends them after a while) and an update made between a read and the next watch would otherwise go unseen.
// observe gets nil when the object does not exist (yet, or any more). The wait ends with ErrTimeout when ctx
// reaches its deadline.
func waitFor(ctx context.Context, c client.WithWatch, key client.ObjectKey, newObj func() client.Object,
	list client.ObjectList, resync time.Duration, observe func(client.Object) (bool, error)) error {
	for {
		obj := newObj()
		err := c.Get(ctx, key, obj)
		switch {
		case apierrors.IsNotFound(err):
			obj = nil
		case err != nil:
			return waitErr(ctx, err)
		}
		if done, err := observe(obj); done || err != nil {
			return err
		}
		if err := watchOnce(ctx, c, key, list, resync, observe); err != nil {
			if errors.Is(err, errDone) {
				return nil
			}
			return waitErr(ctx, err)
		}
	}
}

var errDone = errors.New("done")

// watchOnce watches key's object until observe is done (errDone), the watch ends, or resync passes (nil).
func watchOnce(ctx context.Context, c client.WithWatch, key client.ObjectKey, list client.ObjectList, resync time.Duration,
	observe func(client.Object) (bool, error)) error {
	wctx, cancel := context.WithTimeout(ctx, resync)
	defer cancel()
	w, err := c.Watch(wctx, list, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name})
	if err != nil {
		// No watch (RBAC may allow get but not watch): the resync reads carry on alone.
		<-wctx.Done()
		return ctx.Err()
	}
	defer w.Stop()
	for {
		select {
		case <-wctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return ctx.Err()
			}
			obj, isObj := ev.Object.(client.Object)
			if !isObj || obj.GetName() != key.Name || ev.Type == watch.Error || ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Deleted {
				obj = nil
			}
			done, err := observe(obj)
			if err != nil {
				return err
			}
			if done {
				return errDone
			}
		}
	}
}

// waitErr turns the end of ctx into ErrTimeout (deadline) or a plain interruption.
func waitErr(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ErrTimeout
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return err
}

// progressPrinter prints progress lines with the time since the wait began, as kubectl rollout status does
// without the timestamps a log would carry.
type progressPrinter struct {
	w     io.Writer
	start time.Time
	now   func() time.Time
}

func (p progressPrinter) print(lines ...string) {
	for _, l := range lines {
		fmt.Fprintf(p.w, "[%5s] %s\n", p.now().Sub(p.start).Round(time.Second), l)
	}
}
