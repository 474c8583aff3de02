package multilock_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/multilock"
)

// P1-99: every exported method of a nil or zero Lock or Held answers
// lock.ErrInvalid (or a zero value), never panics.
func TestNilAndZeroValues(t *testing.T) {
	for what, v := range map[string]any{
		"(*Lock)(nil)":     (*multilock.Lock)(nil),
		"&Lock{}":          &multilock.Lock{},
		"(*Held)(nil)":     (*multilock.Held)(nil),
		"&Held{}":          &multilock.Held{},
		"NewRedLock()":     multilock.NewRedLock(),
		"NewRedLock(nil)":  multilock.NewRedLock(nil),
		"NewMultiLock(m0)": multilock.NewMultiLock(&lock.Mutex{}),
	} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumMethod() {
			m := rv.Type().Method(i)
			ft := rv.Method(i).Type()
			var args []reflect.Value
			for j := range ft.NumIn() {
				switch in := ft.In(j); {
				case ft.IsVariadic() && j == ft.NumIn()-1:
				case in == reflect.TypeFor[context.Context]():
					args = append(args, reflect.ValueOf(context.Background()))
				default:
					args = append(args, reflect.Zero(in))
				}
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s.%s panics: %v", what, m.Name, p)
					}
				}()
				for _, o := range rv.Method(i).Call(args) {
					if o.Type() != reflect.TypeFor[error]() {
						continue
					}
					err, _ := o.Interface().(error)
					if !errors.Is(err, lock.ErrInvalid) || strings.Contains(err.Error(), "\n") {
						t.Errorf("%s.%s = %v, want ErrInvalid on one line", what, m.Name, err)
					}
				}
			}()
		}
	}
	var h *multilock.Held
	if !errors.Is(context.Cause(h.Context()), lock.ErrInvalid) {
		t.Fatalf("nil Held's Context cause %v, want ErrInvalid", context.Cause(h.Context()))
	}
}
