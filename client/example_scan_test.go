package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kvd-project/kvd/client"
)

// A prefix scan, paged by hand with a limit: each call returns at most two
// keys, and Next says where the following page starts.
func ExampleClient_Prefix() {
	endpoint, stop := startExampleNode()
	defer stop()
	c, err := client.New(client.Config{Endpoints: []string{endpoint}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for _, k := range []string{"job/1", "job/2", "job/3", "other"} {
		if err := c.Put(ctx, []byte(k), []byte("queued")); err != nil {
			log.Fatal(err)
		}
	}
	end := client.PrefixEnd([]byte("job/"))
	start := []byte("job/")
	for {
		r, err := c.Range(ctx, start, end, client.WithLimit(2))
		if err != nil {
			log.Fatal(err)
		}
		for _, kv := range r.KVs {
			fmt.Printf("%s=%s ", kv.Key, kv.Value)
		}
		fmt.Println(r.More)
		if !r.More {
			break
		}
		start = r.Next
	}
	n, err := c.Prefix(ctx, []byte("job/"), client.WithCountOnly())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n.Count)
	// Output:
	// job/1=queued job/2=queued true
	// job/3=queued false
	// 3
}
