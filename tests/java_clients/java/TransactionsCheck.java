import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The transactional producer: a committed, an aborted and a committed transaction (the last with the offsets of a
 * consume-transform-produce loop), read back with read_committed and read_uncommitted; an open transaction holding
 * the last stable offset back, seen by the admin client (list and describe transactions, describe producers); a
 * second producer with the same transactional.id fencing the first; the admin client's fenceProducers.
 * Args: bootstrap, topic prefix.
 */
public final class TransactionsCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        String topic = prefix + "-txn";
        String source = prefix + "-source";
        String group = prefix + "-group";
        String txnId = prefix + "-tid";
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(Check.props(bootstrap))) {
            Check.createTopic(admin, topic, 1, Map.of());
            Check.createTopic(admin, source, 1, Map.of());

            var first = producer(bootstrap, txnId);
            first.initTransactions();
            transaction(first, topic, "a", 3, true, null);
            transaction(first, topic, "b", 3, false, null);
            transaction(first, topic, "c", 2, true, Map.of(new TopicPartition(source, 0), new OffsetAndMetadata(5L)));
            Check.emit("check", "committed-txns", "error", null);

            // an open transaction: its records are flushed but neither committed nor aborted
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, "open", "d0"));
            first.flush();
            Check.emit("check", "end-offsets", "read_uncommitted", endOffset(bootstrap, tp, "read_uncommitted"),
                    "read_committed", endOffset(bootstrap, tp, "read_committed"));
            adminViews(admin, txnId, tp);
            first.abortTransaction();

            read(bootstrap, tp, "read_committed");
            read(bootstrap, tp, "read_uncommitted");
            try (var c = new KafkaConsumer<String, String>(consumerProps(bootstrap, "read_committed", group))) {
                var committed = c.committed(Set.of(new TopicPartition(source, 0)));
                var om = committed.get(new TopicPartition(source, 0));
                Check.emit("check", "txn-offset-commit", "offset", om == null ? null : om.offset());
            }

            // a second producer with the same id fences the first
            var second = producer(bootstrap, txnId);
            second.initTransactions();
            String fenced = null;
            try {
                first.beginTransaction();
                first.send(new ProducerRecord<>(topic, "zombie", "z")).get();
                first.commitTransaction();
            } catch (Exception e) {
                fenced = Check.error(e);
            }
            Check.emit("check", "fenced-by-second-producer", "error", fenced);
            first.close(Duration.ZERO);
            transaction(second, topic, "e", 1, true, null);
            Check.emit("check", "second-producer-commits", "error", null);

            // the admin client fences it in turn
            String adminFence = null;
            try {
                admin.fenceProducers(List.of(txnId)).all().get();
            } catch (Exception e) {
                adminFence = Check.error(e);
            }
            String afterAdminFence = null;
            try {
                transaction(second, topic, "f", 1, true, null);
            } catch (Exception e) {
                afterAdminFence = Check.error(e);
            }
            Check.emit("check", "admin-fence-producers", "error", adminFence, "next-commit-error", afterAdminFence);
            second.close(Duration.ZERO);
        }
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        return new KafkaProducer<>(Check.props(bootstrap, "transactional.id", txnId,
                "key.serializer", StringSerializer.class.getName(),
                "value.serializer", StringSerializer.class.getName()));
    }

    static void transaction(KafkaProducer<String, String> p, String topic, String tag, int n, boolean commit,
                            Map<TopicPartition, OffsetAndMetadata> offsets) throws Exception {
        p.beginTransaction();
        for (int i = 0; i < n; i++) p.send(new ProducerRecord<>(topic, tag + i, tag + i));
        if (offsets != null) {
            String group = topic.replaceAll("-txn$", "-group");
            p.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(group));
        }
        p.flush(); // the records reach the log even when the transaction is aborted
        if (commit) p.commitTransaction();
        else p.abortTransaction();
    }

    static java.util.Properties consumerProps(String bootstrap, String isolation, String group) {
        var props = Check.props(bootstrap, "isolation.level", isolation, "enable.auto.commit", "false",
                "key.deserializer", StringDeserializer.class.getName(),
                "value.deserializer", StringDeserializer.class.getName());
        if (group != null) props.put("group.id", group);
        return props;
    }

    static long endOffset(String bootstrap, TopicPartition tp, String isolation) {
        try (var c = new KafkaConsumer<String, String>(consumerProps(bootstrap, isolation, null))) {
            return c.endOffsets(List.of(tp)).get(tp);
        }
    }

    /** Every record a consumer at this isolation level reads, and its position once it has read them. */
    static void read(String bootstrap, TopicPartition tp, String isolation) {
        List<Object> records = new ArrayList<>();
        try (var c = new KafkaConsumer<String, String>(consumerProps(bootstrap, isolation, null))) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = c.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 60_000;
            while (c.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (var r : c.poll(Duration.ofMillis(200))) records.add(List.of(r.offset(), r.value()));
            }
            Check.emit("check", "read", "isolation", isolation, "records", records, "position", c.position(tp));
        }
    }

    static void adminViews(Admin admin, String txnId, TopicPartition tp) {
        try {
            var listed = admin.listTransactions(new ListTransactionsOptions()).all().get().stream()
                    .filter(t -> t.transactionalId().equals(txnId))
                    .map(t -> Check.obj("id", t.transactionalId(), "state", t.state().toString())).toList();
            Check.emit("check", "list-transactions", "transactions", listed, "error", null);
        } catch (Exception e) {
            Check.emit("check", "list-transactions", "error", Check.error(e));
        }
        try {
            var d = admin.describeTransactions(List.of(txnId)).description(txnId).get();
            Check.emit("check", "describe-transactions", "state", d.state().toString(),
                    "producerEpoch", d.producerEpoch(), "timeoutMs", d.transactionTimeoutMs(),
                    "topicPartitions", d.topicPartitions().stream().map(TopicPartition::toString).sorted().toList(),
                    "startTimeSet", d.transactionStartTimeMs().isPresent(), "error", null);
        } catch (Exception e) {
            Check.emit("check", "describe-transactions", "error", Check.error(e));
        }
        try {
            var d = admin.describeProducers(List.of(tp)).partitionResult(tp).get();
            var states = d.activeProducers().stream().map(s -> Check.obj(
                    "producerEpoch", s.producerEpoch(), "lastSequence", s.lastSequence(),
                    "coordinatorEpochSet", s.coordinatorEpoch().isPresent(),
                    "currentTransactionStartOffset", s.currentTransactionStartOffset().orElse(-1L))).toList();
            Check.emit("check", "describe-producers", "producers", states, "error", null);
        } catch (Exception e) {
            Check.emit("check", "describe-producers", "error", Check.error(e));
        }
    }
}
