import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The admin client's operations, one "admin" line each ({"op": ..., "result": ... or "error": the exception's
 * simple name}), in a fixed order on topics, a group and a user named for the run. Results carry only what does
 * not depend on the broker's identity (node ids, hosts, ports, paths and sizes are reduced to counts and flags).
 * Args: bootstrap, topic prefix.
 */
public final class AdminCheck {
    /** An hour before the run, whole seconds: records far older than retention.ms (7 days) would be deleted by the
     *  broker's retention check whenever it happens to run, a minute or five after its start. */
    static final long BASE = System.currentTimeMillis() / 1000 * 1000 - 3_600_000L;
    static final List<String> TOPIC_CONFIGS =
            List.of("retention.ms", "cleanup.policy", "segment.bytes", "min.insync.replicas", "compression.type");
    static final List<String> BROKER_CONFIGS = List.of("message.max.bytes", "compression.type",
            "auto.create.topics.enable", "min.insync.replicas", "log.segment.bytes", "offsets.topic.replication.factor",
            "log.cleanup.policy");

    static Admin admin;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String p = args[1];
        String topic = p + "-t";
        String group = p + "-g";
        String user = p + "-alice";
        TopicPartition t0 = new TopicPartition(topic, 0);
        admin = Admin.create(Check.props(bootstrap));
        int brokerId = admin.describeCluster().nodes().get().iterator().next().id();
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        ConfigResource brokerResource = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(brokerId));

        op("describe-cluster", () -> {
            var d = admin.describeCluster();
            var nodes = d.nodes().get();
            int controller = d.controller().get().id();
            return Check.obj("nodes", nodes.size(), "controllerIsANode",
                    nodes.stream().anyMatch(n -> n.id() == controller), "clusterIdSet", d.clusterId().get() != null);
        });
        op("create-topics", () -> {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1)
                    .configs(Map.of("retention.ms", "123456789", "cleanup.policy", "delete")))).all().get();
            return "ok";
        });
        op("create-topics-validate-only", () -> {
            admin.createTopics(List.of(new NewTopic(p + "-v", 2, (short) 1)),
                    new CreateTopicsOptions().validateOnly(true)).all().get();
            return admin.listTopics().names().get().contains(p + "-v");
        });
        op("create-topics-exists", () -> admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get());
        op("create-topics-invalid-name",
                () -> admin.createTopics(List.of(new NewTopic(p + " bad name!", 1, (short) 1))).all().get());
        op("create-topics-replication-factor-too-big",
                () -> admin.createTopics(List.of(new NewTopic(p + "-rf", 1, (short) 3))).all().get());
        op("create-topics-invalid-config", () -> admin.createTopics(List.of(
                new NewTopic(p + "-c", 1, (short) 1).configs(Map.of("retention.ms", "soon")))).all().get());
        waitForLeaders(topic, 3);
        op("list-topics", () -> admin.listTopics().names().get().stream().filter(n -> n.startsWith(p)).sorted().toList());
        op("describe-topics", () -> describeTopic(topic));
        op("describe-topics-unknown", () -> describeTopic(p + "-nothing"));
        op("create-partitions", () -> {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
            waitForLeaders(topic, 4);
            return describeTopic(topic);
        });
        op("create-partitions-decrease",
                () -> admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get());
        op("describe-configs-topic", () -> configs(topicResource, TOPIC_CONFIGS));
        op("incremental-alter-configs-topic", () -> {
            admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "2000000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND),
                    new AlterConfigOp(new ConfigEntry("segment.bytes", ""), AlterConfigOp.OpType.DELETE)))).all().get();
            return configs(topicResource, TOPIC_CONFIGS);
        });
        op("incremental-alter-configs-invalid", () -> admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get());
        op("incremental-alter-configs-unknown-topic", () -> admin.incrementalAlterConfigs(Map.of(
                new ConfigResource(ConfigResource.Type.TOPIC, p + "-nothing"), List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET)))).all().get());
        op("alter-configs-legacy", () -> legacyAlterConfigs(topicResource, topic));
        op("describe-configs-broker", () -> configs(brokerResource, BROKER_CONFIGS));
        op("describe-configs-broker-read-only", () -> {
            Config config = admin.describeConfigs(List.of(brokerResource)).all().get().get(brokerResource);
            Map<String, Object> out = new TreeMap<>();
            for (String name : BROKER_CONFIGS) out.put(name, config.get(name).isReadOnly());
            return out;
        });
        op("describe-configs-broker-log-retention", () -> configs(brokerResource,
                List.of("log.retention.hours", "log.retention.minutes", "log.retention.ms")));
        op("incremental-alter-configs-broker", () -> {
            // message.max.bytes set to its default as a per-broker dynamic config, then deleted again; a broker
            // applies the change when its config-change watch fires, after the answer, so each is waited for
            admin.incrementalAlterConfigs(Map.of(brokerResource, List.of(new AlterConfigOp(
                    new ConfigEntry("message.max.bytes", "1048588"), AlterConfigOp.OpType.SET)))).all().get();
            var set = waitForSource(brokerResource, "message.max.bytes", true);
            admin.incrementalAlterConfigs(Map.of(brokerResource, List.of(new AlterConfigOp(
                    new ConfigEntry("message.max.bytes", ""), AlterConfigOp.OpType.DELETE)))).all().get();
            return List.of(set, waitForSource(brokerResource, "message.max.bytes", false));
        });

        produce(bootstrap, topic);
        consumeAndCommit(bootstrap, topic, group);
        op("list-consumer-groups", () -> admin.listConsumerGroups().all().get().stream()
                .filter(g -> g.groupId().equals(group))
                .map(g -> Check.obj("id", g.groupId(), "simple", g.isSimpleConsumerGroup())).toList());
        op("describe-consumer-groups", () -> {
            var d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            return Check.obj("state", d.state().toString(), "members", d.members().size(),
                    "assignor", d.partitionAssignor(), "simple", d.isSimpleConsumerGroup(),
                    "coordinatorKnown", d.coordinator() != null);
        });
        op("list-consumer-group-offsets", () -> groupOffsets(group));
        op("alter-consumer-group-offsets", () -> {
            admin.alterConsumerGroupOffsets(group, Map.of(t0, new OffsetAndMetadata(1, "one"))).all().get();
            return groupOffsets(group);
        });
        op("delete-consumer-group-offsets", () -> {
            admin.deleteConsumerGroupOffsets(group, Set.of(t0)).all().get();
            return groupOffsets(group);
        });
        op("delete-consumer-groups", () -> {
            admin.deleteConsumerGroups(List.of(group)).all().get();
            return admin.listConsumerGroups().all().get().stream().anyMatch(g -> g.groupId().equals(group));
        });
        op("delete-consumer-groups-unknown", () -> admin.deleteConsumerGroups(List.of(p + "-nogroup")).all().get());

        op("list-offsets", () -> {
            Map<String, Object> out = new TreeMap<>();
            out.put("earliest", listOffset(t0, OffsetSpec.earliest()));
            out.put("latest", listOffset(t0, OffsetSpec.latest()));
            out.put("forTimestamp", listOffset(t0, OffsetSpec.forTimestamp(BASE + 2500)));
            out.put("maxTimestamp", listOffset(t0, OffsetSpec.maxTimestamp()));
            return out;
        });
        op("delete-records", () -> {
            var r = admin.deleteRecords(Map.of(t0, RecordsToDelete.beforeOffset(2))).lowWatermarks().get(t0).get();
            return Check.obj("lowWatermark", r.lowWatermark(), "earliest", listOffset(t0, OffsetSpec.earliest()));
        });
        op("delete-records-beyond-end",
                () -> admin.deleteRecords(Map.of(t0, RecordsToDelete.beforeOffset(1000))).all().get());

        op("elect-leaders-preferred", () -> electionErrors(ElectionType.PREFERRED, topic));
        op("elect-leaders-unclean", () -> electionErrors(ElectionType.UNCLEAN, topic));
        op("list-partition-reassignments", () -> admin.listPartitionReassignments().reassignments().get().size());
        op("alter-partition-reassignments", () -> {
            admin.alterPartitionReassignments(Map.of(t0, Optional.of(new NewPartitionReassignment(List.of(brokerId)))))
                    .all().get();
            long deadline = System.currentTimeMillis() + 60_000;
            while (!admin.listPartitionReassignments().reassignments().get().isEmpty()) {
                if (System.currentTimeMillis() > deadline) return "still in progress";
                Thread.sleep(50);
            }
            return "done";
        });
        op("alter-partition-reassignments-cancel-none", () -> admin.alterPartitionReassignments(
                Map.of(new TopicPartition(topic, 1), Optional.empty())).all().get());
        op("alter-partition-reassignments-unknown-broker", () -> admin.alterPartitionReassignments(
                Map.of(new TopicPartition(topic, 2), Optional.of(new NewPartitionReassignment(List.of(4242)))))
                .all().get());

        op("describe-log-dirs", () -> {
            var dirs = admin.describeLogDirs(List.of(brokerId)).allDescriptions().get().get(brokerId);
            return Check.obj("dirs", dirs.size(), "errors", dirs.values().stream()
                    .map(d -> d.error() == null ? null : d.error().getClass().getSimpleName()).toList(),
                    "holdsPartition0", dirs.values().stream().anyMatch(d -> d.replicaInfos().containsKey(t0)));
        });
        op("describe-replica-log-dirs", () -> {
            var replica = new TopicPartitionReplica(topic, 0, brokerId);
            var d = admin.describeReplicaLogDirs(List.of(replica)).all().get().get(replica);
            return Check.obj("current", d.getCurrentReplicaLogDir() != null, "future", d.getFutureReplicaLogDir());
        });
        op("alter-replica-log-dirs-same-dir", () -> {
            var dirs = admin.describeLogDirs(List.of(brokerId)).allDescriptions().get().get(brokerId);
            var replica = new TopicPartitionReplica(topic, 0, brokerId);
            admin.alterReplicaLogDirs(Map.of(replica, dirs.keySet().iterator().next())).all().get();
            return "ok";
        });
        op("alter-replica-log-dirs-unknown-dir", () -> admin.alterReplicaLogDirs(
                Map.of(new TopicPartitionReplica(topic, 0, brokerId), "/no/such/log/dir")).all().get());
        op("describe-features", () -> {
            var f = admin.describeFeatures().featureMetadata().get();
            return Check.obj("finalized", new TreeMap<>(f.finalizedFeatures()).keySet(),
                    "supported", new TreeMap<>(f.supportedFeatures()).keySet());
        });

        var acl = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry("User:" + user, "*", AclOperation.READ, AclPermissionType.ALLOW));
        op("create-acls", () -> admin.createAcls(List.of(acl)).all().get());
        op("describe-acls", () -> admin.describeAcls(AclBindingFilter.ANY).values().get().size());
        op("delete-acls", () -> admin.deleteAcls(List.of(new AclBindingFilter(
                new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.LITERAL),
                AccessControlEntryFilter.ANY))).all().get().size());

        op("alter-user-scram-credentials", () -> {
            List<UserScramCredentialAlteration> changes = List.of(
                    new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                            "secret"),
                    new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                            "secret"));
            admin.alterUserScramCredentials(changes).all().get();
            return scram(user);
        });
        op("alter-user-scram-credentials-delete", () -> {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user,
                    ScramMechanism.SCRAM_SHA_256))).all().get();
            return scram(user);
        });
        op("alter-user-scram-credentials-too-few-iterations", () -> admin.alterUserScramCredentials(List.of(
                new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10),
                        "secret"))).all().get());
        op("describe-user-scram-credentials-unknown", () -> scram(p + "-nobody"));

        var userEntity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user));
        var clientEntity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, p + "-client"));
        op("alter-client-quotas", () -> {
            admin.alterClientQuotas(List.of(
                    new ClientQuotaAlteration(userEntity, List.of(
                            new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0),
                            new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0))),
                    new ClientQuotaAlteration(clientEntity, List.of(
                            new ClientQuotaAlteration.Op("request_percentage", 50.0))))).all().get();
            return quotas(p);
        });
        op("alter-client-quotas-remove", () -> {
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(userEntity, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get();
            return quotas(p);
        });
        op("alter-client-quotas-unknown-key", () -> admin.alterClientQuotas(List.of(new ClientQuotaAlteration(
                userEntity, List.of(new ClientQuotaAlteration.Op("bytes_per_fortnight", 1.0))))).all().get());

        op("delete-topics", () -> {
            Check.createTopic(admin, p + "-doomed", 1, Map.of());
            admin.deleteTopics(List.of(p + "-doomed")).all().get();
            return "ok";
        });
        op("delete-topics-unknown", () -> admin.deleteTopics(List.of(p + "-nothing")).all().get());
        op("describe-metadata-quorum", () -> admin.describeMetadataQuorum().quorumInfo().get().leaderId() >= 0);
        admin.close(Duration.ofSeconds(30));
    }

    /** Run one operation and print its result, or the name of the exception it ended with. */
    static void op(String name, Callable<Object> body) {
        try {
            Object result = body.call();
            Check.emit("check", "admin", "op", name, "result", result instanceof Void ? null : result, "error", null);
        } catch (Exception e) {
            Check.emit("check", "admin", "op", name, "result", null, "error", Check.error(e));
        }
    }

    /** The config's description once its source is (or is no longer) DYNAMIC_BROKER_CONFIG, or as it is at a
     *  deadline of 30 s. */
    static Object waitForSource(ConfigResource resource, String name, boolean dynamic) throws Exception {
        long deadline = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < deadline) {
            ConfigEntry e = admin.describeConfigs(List.of(resource)).all().get().get(resource).get(name);
            if (e != null && (e.source() == ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG) == dynamic) break;
            Thread.sleep(50);
        }
        return configs(resource, List.of(name));
    }

    static void waitForLeaders(String topic, int partitions) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        while (System.currentTimeMillis() < deadline) {
            try {
                var d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                if (d.partitions().size() == partitions && d.partitions().stream().allMatch(x -> x.leader() != null)) {
                    return;
                }
            } catch (Exception e) {
                // not there yet
            }
            Thread.sleep(50);
        }
    }

    static Object describeTopic(String topic) throws Exception {
        var d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        List<Object> parts = new ArrayList<>();
        for (var x : d.partitions()) {
            parts.add(Check.obj("partition", x.partition(), "replicas", x.replicas().size(), "isr", x.isr().size(),
                    "hasLeader", x.leader() != null));
        }
        return Check.obj("internal", d.isInternal(), "partitions", parts, "topicIdSet", d.topicId() != null);
    }

    static Object configs(ConfigResource resource, List<String> names) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        Map<String, Object> out = new TreeMap<>();
        for (String name : names) {
            ConfigEntry e = config.get(name);
            // readOnly only for topics: for a broker it says whether the config is dynamic (reported apart)
            out.put(name, e == null ? null : Check.obj("value", e.value(), "source", e.source().toString(),
                    "default", e.isDefault(), "readOnly", resource.type() == ConfigResource.Type.TOPIC
                            ? e.isReadOnly() : null, "sensitive", e.isSensitive(), "type", e.type().toString()));
        }
        return out;
    }

    /** The pre-KIP-339 alterConfigs, gone from the 4.x client, called where the client still has it. */
    static Object legacyAlterConfigs(ConfigResource resource, String topic) throws Exception {
        Method m;
        try {
            m = Admin.class.getMethod("alterConfigs", Map.class);
        } catch (NoSuchMethodException e) {
            return "not in this client";
        }
        var config = new Config(List.of(new ConfigEntry("segment.bytes", "1048576"),
                new ConfigEntry("retention.ms", "3000000")));
        Object result = m.invoke(admin, Map.of(resource, config));
        ((org.apache.kafka.common.KafkaFuture<?>) result.getClass().getMethod("all").invoke(result)).get();
        return configs(resource, TOPIC_CONFIGS);
    }

    static void produce(String bootstrap, String topic) throws Exception {
        try (var producer = new KafkaProducer<String, String>(Check.props(bootstrap,
                "key.serializer", StringSerializer.class.getName(),
                "value.serializer", StringSerializer.class.getName()))) {
            for (int i = 0; i < 5; i++) producer.send(new ProducerRecord<>(topic, 0, BASE + i * 1000L, "k", "v" + i));
            producer.flush();
        }
    }

    static void consumeAndCommit(String bootstrap, String topic, String group) {
        try (var c = new KafkaConsumer<String, String>(Check.props(bootstrap, "group.id", group,
                "auto.offset.reset", "earliest", "enable.auto.commit", "false",
                "key.deserializer", StringDeserializer.class.getName(),
                "value.deserializer", StringDeserializer.class.getName()))) {
            c.subscribe(List.of(topic));
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < 5 && System.currentTimeMillis() < deadline) seen += c.poll(Duration.ofMillis(200)).count();
            c.commitSync();
        }
    }

    static Object groupOffsets(String group) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().forEach((tp, om) ->
                out.put(tp.toString().substring(group.length() - 1), om == null ? null
                        : Check.obj("offset", om.offset(), "metadata", om.metadata())));
        return out;
    }

    static Object listOffset(TopicPartition tp, OffsetSpec spec) throws Exception {
        var info = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
        return Check.obj("offset", info.offset(), "timestamp", info.timestamp() < 0 ? info.timestamp()
                : info.timestamp() - BASE);
    }

    static Object electionErrors(ElectionType type, String topic) throws Exception {
        Set<TopicPartition> parts = Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        Map<String, Object> out = new TreeMap<>();
        admin.electLeaders(type, parts).partitions().get().forEach((tp, err) ->
                out.put(String.valueOf(tp.partition()), err.map(e -> e.getClass().getSimpleName()).orElse(null)));
        return out;
    }

    static Object scram(String user) throws Exception {
        var d = admin.describeUserScramCredentials(List.of(user)).description(user).get();
        return d.credentialInfos().stream().map(i -> Check.obj("mechanism", i.mechanism().toString(),
                "iterations", i.iterations())).sorted((a, b) -> a.toString().compareTo(b.toString())).toList();
    }

    static Object quotas(String prefix) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get().forEach((entity, values) -> {
            String key = entity.entries().toString();
            if (key.contains(prefix)) out.put(key.replace(prefix, "P"), new TreeMap<>(values));
        });
        return out;
    }
}
