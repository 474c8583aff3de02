// Package redissonconfig reads a Redisson YAML config (what Redisson's
// Config.fromYAML reads) into a lock.Config, so that a Go service locks
// on the same Redis, with the same names and timings, as the Java
// services whose config it shares.
//
//	cfg, warnings, err := redissonconfig.Load(data)
//	c, err := lock.New(ctx, cfg)
//
// What each setting becomes:
//
//	Redisson                                     lock.Config
//	singleServerConfig.address                   Addrs: the master
//	sentinelServersConfig.sentinelAddresses      Addrs: the sentinels
//	sentinelServersConfig.masterName             MasterSet
//	sentinelUsername, sentinelPassword           SentinelUsername, SentinelPassword
//	clusterServersConfig.nodeAddresses           Addrs: seed nodes; Cluster
//	clusterServersConfig.shardedSubscriptionMode PubSub: AUTO, ON (Sharded), OFF (Plain)
//	username, password                           Username, Password
//	database                                     DB (0 in a cluster)
//	rediss:// addresses                          TLS, verified as sslVerificationMode
//	                                             (or the older sslEnableEndpointIdentification) says
//	timeout                                      CommandTimeout
//	connectTimeout                               DialTimeout
//	lockWatchdogTimeout                          WatchdogTimeout
//	fairLockWaitTimeout                          FairLockWaitTimeout
//	checkLockSyncedSlaves, slavesSyncTimeout     ReplicaSyncTimeout (false: negative, no check)
//	nameMapper                                   NameMapper, from WithNameMapper
//
// As in Redisson, username, password, nameMapper and the ssl settings may
// be given at the top level or (deprecated there) in the servers config,
// and the top level's win; credentials in an address
// (redis://user:password@host:port) win over both. The path of an address
// (/db) is ignored, as Redisson ignores it. Variables ${NAME} and
// ${NAME:-default} are replaced from the environment; a ${NAME} that is
// not set and has no default is an error (Redisson would use the text
// "${NAME}" itself, as a password say).
//
// Every other setting is listed in the warnings, with the reason it is
// not used; none of them changes what the locks exclude. Among them:
// sslTruststore and sslKeystore are Java keystores, which rlock cannot
// read: give the CA and the client certificate as PEM in Config.TLS
// (RootCAs, Certificates) instead.
//
// Load refuses, as an error matching lock.ErrInvalid with the line and
// the reason: malformed YAML; a value of the wrong type; a servers config
// rlock does not support (replicated, master/slave, proxy, multi-cluster,
// multi-sentinel); a lockWatchdogTimeout below lock.MinLease; a timeout
// that could let a renewal be answered after the lease it extends ran out
// (timeout + lockWatchdogTimeout/3 must be less than lockWatchdogTimeout);
// a slavesSyncTimeout of 0 or not shorter than the lease; and a
// nameMapper without the same mapping in Go, given with WithNameMapper.
package redissonconfig
