import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The producer with every codec and every acks setting, then an explicitly idempotent producer: each sends keyed
 * records to a one-partition topic of its own, and one consumer reads every topic back.
 * Args: bootstrap, topic prefix. Prints one "send" line per producer and one "read" line per topic.
 */
public final class ProducerCheck {
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final String[] ACKS = {"0", "1", "all"};
    static final int RECORDS = 20;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        Map<String, Integer> expected = new HashMap<>();
        try (Admin admin = Admin.create(Check.props(bootstrap))) {
            for (String codec : CODECS) {
                for (String acks : ACKS) {
                    String topic = prefix + "-" + codec + "-" + (acks.equals("all") ? "all" : "acks" + acks);
                    Check.createTopic(admin, topic, 1, Map.of());
                    send(bootstrap, topic, codec, acks, false);
                    expected.put(topic, RECORDS);
                }
            }
            String topic = prefix + "-idempotent";
            Check.createTopic(admin, topic, 1, Map.of());
            send(bootstrap, topic, "lz4", "all", true);
            expected.put(topic, RECORDS);
        }
        readBack(bootstrap, expected);
    }

    static void send(String bootstrap, String topic, String codec, String acks, boolean idempotent) {
        var props = Check.props(bootstrap, "acks", acks, "compression.type", codec, "linger.ms", "5",
                "key.serializer", StringSerializer.class.getName(),
                "value.serializer", StringSerializer.class.getName());
        if (idempotent) {
            props.put("enable.idempotence", "true");
            props.put("max.in.flight.requests.per.connection", "5");
        }
        List<Object> offsets = new ArrayList<>();
        String error = null;
        try (var producer = new KafkaProducer<String, String>(props)) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < RECORDS; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, "k" + i, codec + "-" + acks + "-" + i)));
                if (i == RECORDS / 2) producer.flush(); // two batches at least
            }
            producer.flush();
            for (var f : sent) {
                RecordMetadata md = f.get();
                offsets.add(md.hasOffset() ? md.offset() : -1L);
            }
        } catch (Exception e) {
            error = Check.error(e);
        }
        Check.emit("check", "send", "topic", topic, "codec", codec, "acks", acks, "idempotent", idempotent,
                "offsets", offsets, "error", error);
    }

    static void readBack(String bootstrap, Map<String, Integer> expected) {
        var props = Check.props(bootstrap, "key.deserializer", StringDeserializer.class.getName(),
                "value.deserializer", StringDeserializer.class.getName(), "enable.auto.commit", "false");
        Map<String, List<Object>> seen = new HashMap<>();
        try (var consumer = new KafkaConsumer<String, String>(props)) {
            List<TopicPartition> parts = expected.keySet().stream().sorted().map(t -> new TopicPartition(t, 0)).toList();
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            int want = expected.values().stream().mapToInt(Integer::intValue).sum();
            int got = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (got < want && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    seen.computeIfAbsent(r.topic(), t -> new ArrayList<>())
                            .add(List.of(r.offset(), r.key(), r.value()));
                    got++;
                }
            }
        }
        for (String topic : expected.keySet().stream().sorted().toList()) {
            Check.emit("check", "read", "topic", topic, "records", seen.getOrDefault(topic, List.of()));
        }
    }
}
