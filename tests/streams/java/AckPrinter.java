import java.util.Map;

import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * A producer interceptor printing {@code {"acked":"<topic>"}} as the broker acknowledges each record: the record is
 * then in the partition's log, inside a transaction not yet committed under exactly-once. WordCountApp installs it
 * with {@code print-acks}, so a test can kill an instance while its transaction holds records.
 */
public final class AckPrinter implements ProducerInterceptor<byte[], byte[]> {
    @Override
    public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
        return record;
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
        if (exception == null && metadata != null) {
            synchronized (System.out) {
                System.out.println("{\"acked\":\"" + metadata.topic() + "\"}");
                System.out.flush();
            }
        }
    }

    @Override
    public void close() {
    }

    @Override
    public void configure(Map<String, ?> configs) {
    }
}
