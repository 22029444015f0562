import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The consumer's offset API on one partition of ten records with known timestamps: offsetsForTimes, seek,
 * seekToBeginning/End, beginningOffsets/endOffsets, then a group member's commitSync (explicit and of its position)
 * read back with committed(), and a new member of the same group starting from the committed offset.
 * Args: bootstrap, topic prefix, group.protocol (classic or consumer).
 */
public final class ConsumerCheck {
    /** An hour before the run, whole seconds: records far older than retention.ms (7 days) would be deleted by the
     *  broker's retention check whenever it happens to run, a minute or five after its start. */
    static final long BASE = System.currentTimeMillis() / 1000 * 1000 - 3_600_000L;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1] + "-seek";
        String protocol = args[2];
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(Check.props(bootstrap))) {
            Check.createTopic(admin, topic, 1, Map.of());
        }
        try (var p = new KafkaProducer<String, String>(Check.props(bootstrap,
                "key.serializer", StringSerializer.class.getName(),
                "value.serializer", StringSerializer.class.getName()))) {
            for (int i = 0; i < 10; i++) p.send(new ProducerRecord<>(topic, 0, BASE + i * 1000L, "k" + i, "v" + i));
            p.flush();
        }
        var props = Check.props(bootstrap, "enable.auto.commit", "false", "auto.offset.reset", "earliest",
                "key.deserializer", StringDeserializer.class.getName(),
                "value.deserializer", StringDeserializer.class.getName());
        try (var c = new KafkaConsumer<String, String>(props)) {
            c.assign(List.of(tp));
            for (long ts : new long[] {BASE - 1, BASE + 2500, BASE + 9000, BASE + 99_999}) {
                var found = c.offsetsForTimes(Map.of(tp, ts)).get(tp);
                Check.emit("check", "offsets-for-times", "timestamp", ts - BASE,
                        "offset", found == null ? null : found.offset(),
                        "recordTimestamp", found == null ? null : found.timestamp() - BASE,
                        "leaderEpoch", found == null ? null : found.leaderEpoch().orElse(-1));
            }
            c.seek(tp, 4);
            Check.emit("check", "seek", "first", firstOffset(c));
            var byTime = c.offsetsForTimes(Map.of(tp, BASE + 6500)).get(tp);
            c.seek(tp, byTime.offset());
            Check.emit("check", "seek-by-time", "first", firstOffset(c));
            c.seekToBeginning(List.of(tp));
            long begin = c.position(tp);
            c.seekToEnd(List.of(tp));
            Check.emit("check", "seek-to-ends", "beginning", begin, "end", c.position(tp),
                    "beginningOffsets", c.beginningOffsets(List.of(tp)).get(tp),
                    "endOffsets", c.endOffsets(List.of(tp)).get(tp));
        }

        String group = args[1] + "-commits";
        var groupProps = Check.props(bootstrap, "enable.auto.commit", "false", "auto.offset.reset", "earliest",
                "group.id", group, "group.protocol", protocol,
                "key.deserializer", StringDeserializer.class.getName(),
                "value.deserializer", StringDeserializer.class.getName());
        if (protocol.equals("classic")) groupProps.remove("group.protocol"); // 3.x clients do not know the setting
        try (var c = new KafkaConsumer<String, String>(groupProps)) {
            c.subscribe(List.of(topic));
            Check.emit("check", "group-read", "offsets", offsets(c, 10));
            c.commitSync(Map.of(tp, new OffsetAndMetadata(7, "seven")));
            var om = c.committed(Set.of(tp)).get(tp);
            Check.emit("check", "commit-explicit", "offset", om.offset(), "metadata", om.metadata());
            c.commitSync();
            om = c.committed(Set.of(tp)).get(tp);
            Check.emit("check", "commit-position", "offset", om.offset(), "metadata", om.metadata());
            c.seek(tp, 3);
            c.commitSync();
        }
        try (var c = new KafkaConsumer<String, String>(groupProps)) {
            c.subscribe(List.of(topic));
            Check.emit("check", "resume-from-committed", "offsets", offsets(c, 7));
            describeGroup(bootstrap, group, "describe-group-live");
        }
        describeGroup(bootstrap, group, "describe-group-empty");
    }

    /** The admin client's view of the group: its type, state, assignor and members' assignments. */
    static void describeGroup(String bootstrap, String group, String check) throws Exception {
        try (Admin admin = Admin.create(Check.props(bootstrap))) {
            var d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            var members = d.members().stream().map(m -> m.assignment().topicPartitions().stream()
                    .map(tp -> tp.partition()).sorted().toList()).toList();
            Check.emit("check", check, "type", d.type().toString(), "state", d.state().toString(),
                    "assignor", d.partitionAssignor(), "members", members);
        }
    }

    /** The offsets of the next ``count`` records the consumer polls (fewer if a minute passes first). */
    static List<Object> offsets(KafkaConsumer<String, String> c, int count) {
        List<Object> offsets = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 60_000;
        while (offsets.size() < count && System.currentTimeMillis() < deadline) {
            for (var r : c.poll(Duration.ofMillis(200))) offsets.add(r.offset());
        }
        return offsets;
    }

    static Object firstOffset(KafkaConsumer<String, String> c) {
        long deadline = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < deadline) {
            var records = c.poll(Duration.ofMillis(200));
            if (!records.isEmpty()) return records.iterator().next().offset();
        }
        return null;
    }
}
