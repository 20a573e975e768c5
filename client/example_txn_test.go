package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/kvd-project/kvd/client"
)

// A compare-and-swap: read the version, write only if nobody wrote since.
func ExampleIfModRevision() {
	endpoint, stop := startExampleNode()
	defer stop()
	c, err := client.New(client.Config{Endpoints: []string{endpoint}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// Version 0: create the key only if it does not exist.
	v1, err := c.PutRevision(ctx, []byte("leader"), []byte("alice"), client.IfModRevision(0))
	if err != nil {
		log.Fatal(err)
	}
	// Someone else's swap from the same version loses.
	_, err = c.PutRevision(ctx, []byte("leader"), []byte("bob"), client.IfModRevision(0))
	var ce *client.ConflictError
	fmt.Println(errors.Is(err, client.ErrConflict), errors.As(err, &ce) && ce.ModRevision == v1)
	// A swap from the current version wins.
	if _, err := c.PutRevision(ctx, []byte("leader"), []byte("carol"), client.IfModRevision(v1)); err != nil {
		log.Fatal(err)
	}
	v, _ := c.Get(ctx, []byte("leader"))
	fmt.Printf("%s\n", v)
	// Output:
	// true true
	// carol
}

// A transaction: move a value from one key to another, atomically, only
// if the source is unchanged and the destination free.
func ExampleClient_Txn() {
	endpoint, stop := startExampleNode()
	defer stop()
	c, err := client.New(client.Config{Endpoints: []string{endpoint}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	version, err := c.PutRevision(ctx, []byte("inbox/1"), []byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	r, err := c.Txn(ctx, client.Txn{
		If: []client.Cmp{
			client.CompareModRevision([]byte("inbox/1"), client.CmpEqual, version),
			client.KeyMissing([]byte("done/1")),
		},
		Then: []client.Op{client.OpPut([]byte("done/1"), []byte("hello")), client.OpDelete([]byte("inbox/1"))},
		Else: []client.Op{client.OpGet([]byte("done/1"))},
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Get(ctx, []byte("inbox/1"))
	fmt.Println(r.Succeeded, r.Results[1].Found, errors.Is(err, client.ErrNotFound))
	// Output:
	// true true true
}
